"""Value candidates: for one property of a leaf's schema, the values the request actually
holds, each with a prior (a logit bias the model's constrained choice starts from).

Numbers come normalised ("5k" → 5000, "$1.2M" → 1200000), dates and times in the schema's
format, enum values matched to the request's words, e-mails, phone numbers, ids, quoted text,
word spans that neither start nor end with a function word, booleans from the request's yes and
no words (`polarity.py`) and arrays of copyable values (`lists.py`). Nothing is invented: every
candidate is in the request (an enum value or a normalised form of it)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from stackroute.runtime.schemas import value_checker
from stackroute.server.embeddings.words import STOP_WORDS, singular
from stackroute.server.routing.arguments.addresses import address_candidates, wants_address
from stackroute.server.routing.arguments.candidate import Candidate
from stackroute.server.routing.arguments.coordinates import coordinate_candidates
from stackroute.server.routing.arguments.corrections import corrected
from stackroute.server.routing.arguments.countries import country_candidates
from stackroute.server.routing.arguments.cues import (
    joined_forms,
    label_positions,
    near,
    own_naming,
    phrase_positions,
    property_words,
)
from stackroute.server.routing.arguments.currencies import currency_candidates
from stackroute.server.routing.arguments.dates import date_forms, time_forms, time_of
from stackroute.server.routing.arguments.described_codes import described_code_candidates
from stackroute.server.routing.arguments.enums import enum_candidates, enum_matched
from stackroute.server.routing.arguments.lists import list_candidates
from stackroute.server.routing.arguments.measures import (
    area_after,
    area_named,
    measure_candidates,
    measure_unit,
    unit_name,
)
from stackroute.server.routing.arguments.money import MONEY_WORD
from stackroute.server.routing.arguments.numbers import UNIT_AFTER
from stackroute.server.routing.arguments.pattern_forms import (
    is_structured,
    matches,
    pattern_forms,
)
from stackroute.server.routing.arguments.phones import phone_candidates, wants_phone
from stackroute.server.routing.arguments.polarity import boolean_candidates
from stackroute.server.routing.arguments.regions import region_candidates
from stackroute.server.routing.arguments.request_text import RequestText
from stackroute.server.routing.arguments.seasons import names_a_term, term_candidates
from stackroute.server.routing.arguments.sibling_labels import (
    WHEN_FORMATS,
    WHEN_WORDS,
    directed,
    held_back,
    shared_labelled,
)
from stackroute.server.routing.arguments.spans import (
    NO_LEAF_WORDS,
    LeafWords,
    spans,
    topic_words,
)

__all__ = ["WHEN_FORMATS", "WHEN_WORDS", "Candidate", "LeafWords", "candidates", "enum_matched",
           "property_words", "schema_of", "topic_words"]

MAX_CANDIDATES = 48
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_DATE_WORDS = ("date", "day", "month", "deadline", "birthday", "when", "start", "end", "until",
               "since")
_TIME_WORDS = ("time", "hour", "start", "end", "when")
_LANGUAGE = re.compile(r"\b(?:English|French|Spanish|German|Italian|Portuguese|Dutch|Russian|"
                       r"Chinese|Mandarin|Cantonese|Japanese|Korean|Arabic|Hindi|Bengali|"
                       r"Turkish|Polish|Greek|Hebrew|Swedish|Vietnamese|Thai|Indonesian|"
                       r"Swahili|Urdu|Persian)\b")
# An age said the ways one is said, around its number: "49-year-old", "49 years old", "aged 49"
_YEARS_OLD = re.compile(r"\s*-?\s*years?[\s-]+old\b", re.IGNORECASE)
_AGED = re.compile(r"\baged\s+$", re.IGNORECASE)
LABEL_PRIOR = 2.0  # a number its property's name, unit or currency labels ("$250" in dollars)
_UNIT_IN = re.compile(r"\b(?:in|many|number of)\s+(?:square\s+|cubic\s+|us\s+)?([a-z]+)")
# An amount written with its cents ("25.50", "1,299.00") is money for a property that holds it
_CENTS = re.compile(r"\d[\d,]*\.\d\d")
_MONEY_WORDS = frozenset(("amount", "price", "cost", "budget", "salary", "fee", "total",
                          "revenue", "income", "balance", "payment"))
# A count of people, said as one ("2 of us", "4 people", "a party of 6"), for a property that
# counts people (its name, or the unit its description counts in: "Number of travelers")
_PEOPLE = frozenset(("people", "person", "passenger", "traveler", "traveller", "guest", "adult",
                     "attendee", "participant", "diner", "pax", "party", "headcount"))
_PERCENT_WORDS = frozenset(("percent", "percentage", "pct"))
_LOW_WORDS = frozenset(("min", "minimum", "lower", "low", "floor", "least", "start", "earliest"))
_HIGH_WORDS = frozenset(("max", "maximum", "upper", "high", "ceiling", "most", "end", "latest"))
_OF_US = re.compile(r"\s+of\s+us\b", re.IGNORECASE)
_PARTY_OF = re.compile(r"\b(?:party|group)\s+of\s+$", re.IGNORECASE)
LITERAL_PRIOR = 3.0  # a URL, IP address, file name or path: written to be copied
# a value of the kind its property wants, which no other kind of property takes: an e-mail, a
# phone number, a date, a time, a language name, a reason after "because" (support.py)
TYPED_PRIOR = 3.0
# a date its property's name labels: above the request's other dates, which every date
# property takes at TYPED_PRIOR (a sibling's label holds it back by SIBLING_PENALTY)
DATE_LABEL_BONUS = 0.5
PIECE_PENALTY = 2.0  # a piece of a value the property takes whole (a street address)
# What follows a colon to the end of the request is what to write ("a ticket in OPS: Disk full
# on db-3"), for a property that holds free text; below a quote, which says so outright
CLAUSE_PRIOR = 2.5
_NUMBERED = re.compile(r"(?<![\w#])#\s?([A-Za-z0-9][\w-]*)")  # "check #5521", "order # A-77"
_AFTER_COLON = re.compile(r":\s+(\S[^:\n]*?)[.!]?\s*$")
_TEXT_WORDS = frozenset(("message", "summary", "text", "body", "content", "note", "notes",
                         "comment", "description", "reason", "caption", "title", "details"))
# What follows "because" or "due to" to the end of its clause is the reason, said as outright
# as a quote: a clause after "because" whole ("because the item arrived damaged"), a noun
# phrase after "because of" or "due to" without its article ("due to a schedule conflict")
_AFTER_BECAUSE = re.compile(r"\b(?i:(because of|due to)(?:\s+(?:a|an|the)\b)?|because)"
                            r"\s+([^\s.!?,;:][^.!?,;:\n]*)")
_REASON_WORDS = frozenset(("reason", "reasons", "cause", "justification", "rationale", "why"))


def candidates(name: str, schema: Mapping[str, Any], request: str | RequestText, *,
               siblings: Sequence[str] | Mapping[str, Mapping[str, Any]] = (),
               topic: LeafWords = NO_LEAF_WORDS) -> list[Candidate]:
    """The values `request` holds for property `name` (its JSON schema `schema`), most
    plausible first, unique by text, at most MAX_CANDIDATES. `siblings`: the leaf's other
    properties (their schemas, where known); a value the request labels with a sibling's name
    ("the ID X" for `post_id`) and not with this property's is held back (SIBLING_PENALTY),
    where that sibling takes a value of its kind. `topic`: the leaf's own
    words (`topic_words`); a plain span of them, or of FILLER, is the request restating the
    tool ("assess the supply chain *risk*"), held back by TOPIC_PENALTY. A leaf's properties
    share one reading of the request (`RequestText.read`); a string is read here."""
    read = request if isinstance(request, RequestText) else RequestText.read(request)
    sibling_schemas = siblings if isinstance(siblings, Mapping) else {s: {} for s in siblings}
    sibling_names = list(sibling_schemas)
    text = read.text
    kind = schema.get("type")
    words = property_words(name, schema)
    # a word the siblings share ("number" of policy_number and flight_number) labels neither;
    # the name written as one word ("checkout" of new_check_out) does, where no sibling's is
    naming = own_naming(name, words, sibling_names)
    forms = joined_forms(name)
    cues = label_positions(text, naming.words, words, joined=naming.joined,
                           unless=naming.unless) or phrase_positions(text, name)
    if "enum" in schema:
        found = enum_candidates(schema["enum"], read, siblings=sibling_names, cues=cues) \
            + _coded(name, schema, text)
    elif kind == "boolean":
        found = boolean_candidates(text, cues, words)
    elif kind in ("integer", "number"):
        found = _number_candidates(kind, read, cues, words, schema)
    elif kind in ("string", None):
        found = _coded(name, schema, text) + _string_candidates(schema, read, cues, words, topic)
        if wants_address(words, schema):  # "77 harbor view ln apt 3, san diego ca 92101"
            found = _whole(found, address_candidates(text, sibling_names, prior=TYPED_PRIOR))
    elif kind == "array":
        found = list_candidates(name, schema, read, siblings=sibling_schemas, topic=topic,
                                element=candidates)
    else:
        found = []  # objects, and arrays of nothing copyable: the model writes them (fallback)
    fits = value_checker(schema)  # a value the schema refuses would fail the call
    found = corrected(directed(held_back([c for c in found if fits(c.value)], text, cues, words,
                                         sibling_schemas, forms), text, words), text)
    if sibling_schemas:
        found = shared_labelled(found, text, name, words, sibling_schemas, prior=TYPED_PRIOR)
    unique: dict[str, Candidate] = {}
    for candidate in sorted(found, key=lambda c: -c.prior):
        if candidate.text and not candidate.text[0].isspace():
            unique.setdefault(candidate.text, candidate)
    return list(unique.values())[:MAX_CANDIDATES]


def schema_of(prop: Any) -> Mapping[str, Any]:
    """A property's JSON schema as a catalog gives it: a mapping, or nothing (`{}`)."""
    return prop if isinstance(prop, Mapping) else {}


def _coded(name: str, schema: Mapping[str, Any], text: str) -> list[Candidate]:
    """The countries, currencies, states and provinces and the terms (season and year) the
    request names, as the codes the property wants (none where it wants no code), and the
    codes its description explains whose meanings the request says."""
    return described_code_candidates(schema, text, prior=TYPED_PRIOR) \
        + country_candidates(name, schema, text, prior=TYPED_PRIOR) \
        + currency_candidates(name, schema, text, prior=TYPED_PRIOR) \
        + region_candidates(name, schema, text, prior=TYPED_PRIOR) \
        + term_candidates(name, schema, text, prior=TYPED_PRIOR)


def _whole(found: list[Candidate], wholes: list[Candidate]) -> list[Candidate]:
    """`found` and `wholes` (values of several words the property takes whole: a street
    address), the pieces of a whole in `found` held back by PIECE_PENALTY ("1200" of "1200
    Elm Street, Springfield, IL 62704")."""
    spans = [w.span for w in wholes if w.span is not None]
    return wholes + [replace(c, prior=c.prior - PIECE_PENALTY) if c.span is not None and any(
        a <= c.span[0] and c.span[1] <= b for a, b in spans) else c for c in found]


def _units(schema: Mapping[str, Any]) -> frozenset[str]:
    """The units a number's description counts in, singular: the word after "in", "many" or
    "number of" ("The duration in minutes", "At or below this many units"); not any word of it
    ("The age limit for participants" does not count participants)."""
    described = schema.get("description")
    if not isinstance(described, str):
        return frozenset()
    return frozenset(singular(m[1]) for m in _UNIT_IN.finditer(described.lower())
                     if m[1] not in STOP_WORDS)


def _number_candidates(kind: str, read: RequestText, cues: list[tuple[int, int]],
                       words: list[str], schema: Mapping[str, Any]) -> list[Candidate]:
    request, blocked = read.text, read.when
    units = _units(schema)
    # a description that prices in a currency: an amount of money ("$250") is in its unit
    priced = bool(MONEY_WORD.search(str(schema.get("description", ""))))
    money = any(w in _MONEY_WORDS for w in words)
    percent = bool(_PERCENT_WORDS & set(words))
    people = bool(_PEOPLE & ({singular(w) for w in words} | units))
    # the units it counts in: its description's, or one its name says (`lookback_years`)
    named_units = {unit_name(w) for w in (*units, *words)}
    end = range_end(words)  # "140k-165k" for `salary_min`, `salary_max`
    area = area_named(f"{'_'.join(words)} {schema.get('description', '')}")  # "320 sq ft"
    out = []
    for number in read.numbers:
        if any(a <= number.span[0] < b for a, b in blocked):
            continue
        value = number.value
        if kind == "integer" and isinstance(value, float):
            continue
        unit = UNIT_AFTER.match(request, number.span[1])
        labelled = near(number.span, cues, request, before=True) or ("age" in words and (
            _YEARS_OLD.match(request, number.span[1]) is not None
            or _AGED.search(request[:number.span[0]]) is not None)) or (
            unit is not None and unit_name(unit[1]) in named_units) or (  # "5 units", "5yr"
            number.is_money and priced) or (  # "$250" for a price in dollars
            (money or priced) and _CENTS.fullmatch(number.text) is not None) or (
            people and _counts_people(request, number.span, unit)) or (
            percent and number.is_percent) or (
            end > 0 and number.range_part == end) or (
            area is not None and area_after(request, number.span[1]) == area)
        prior = LABEL_PRIOR if labelled else 0.0
        # an amount of money for a property of money, a percentage for one of a percentage
        # ("to 80%" for `targetSocPercent`, though "1 to 80%" also ends a range for `maxPowerKw`)
        prior += 1.0 if (money and number.is_money) or (percent and number.is_percent) else 0.0
        text = str(value) if not isinstance(value, float) else repr(value)
        out.append(Candidate(value, text, "number", prior=prior, span=number.span))
    out += coordinate_candidates(words, request, prior=TYPED_PRIOR)  # "33.0198, -96.6989"
    unit = measure_unit(words, units)
    if unit is not None:  # "an hour", "2 hours" for a property counting minutes
        out += measure_candidates(read, unit, is_integer=kind == "integer", prior=LABEL_PRIOR)
    if words and words[-1] in ("year", "month"):  # "Aug 2027" for `year`, `month`
        out += [Candidate(part, str(part), "number", LABEL_PRIOR, d.span) for d in read.dates
                if d.day is None  # a month (a whole date's year is seldom the property's)
                and (part := d.year if words[-1] == "year" else d.month) is not None]
    return out


def range_end(words: list[str]) -> int:
    """Which end of a range a property holds, by its words: 1 the low or the start
    (`salary_min`, `window_start`), 2 the high or the end (`maximum_price`, `window_end`), 0
    neither."""
    return 1 if _LOW_WORDS & set(words) else 2 if _HIGH_WORDS & set(words) else 0


def _is_clock(pattern: str) -> bool:
    """Whether a pattern writes a clock time (HH:MM): it takes "09:30" and "23:59" and
    refuses "0930" and a word."""
    return all(matches(pattern, t) for t in ("09:30", "23:59")) \
        and not any(matches(pattern, t) for t in ("0930", "abc"))


def _counts_people(request: str, span: tuple[int, int], unit: re.Match[str] | None) -> bool:
    """Whether the number at `span` counts people: "2 of us", "4 people", "a party of 6"."""
    return (unit is not None and singular(unit[1].lower()) in _PEOPLE) \
        or _OF_US.match(request, span[1]) is not None \
        or _PARTY_OF.search(request[:span[0]]) is not None


def _string_candidates(schema: Mapping[str, Any], read: RequestText,
                       cues: list[tuple[int, int]], words: list[str],
                       topic: LeafWords) -> list[Candidate]:
    request = read.text
    fmt = schema.get("format")
    pattern = schema.get("pattern")
    described = " ".join(words) + " " + str(schema.get("description", "")).lower()
    out: list[Candidate] = []
    if fmt == "email" or "email" in words or "mail" in words:
        out += [Candidate(m[0], m[0], "email", TYPED_PRIOR) for m in _EMAIL.finditer(request)]
        if fmt == "email":
            return out
    wants_date = fmt in ("date", "date-time") or any(w in described for w in _DATE_WORDS)
    if wants_date:
        for found in read.dates:
            prior = TYPED_PRIOR if fmt in ("date", "date-time") or "date" in described else 1.0
            forms = date_forms(found, schema_format=fmt, end=range_end(words), at=time_of(
                found, read.times, request, only=sum(d.day is not None for d in read.dates) == 1))
            if pattern and found.year is not None:
                forms.append(found.iso[:7])  # a month pattern (YYYY-MM) takes the month
            # the date its property's name labels ("checkout to 2027-09-13") over another
            labelled = DATE_LABEL_BONUS if near(found.span, cues, request, before=True) else 0.0
            out += [Candidate(f, f, "date", prior + labelled, found.span) for f in forms]
    clock = bool(pattern) and _is_clock(pattern)
    dated = fmt == "date-time" and any(c.kind == "date" for c in out)  # a time alone is none
    if not dated and (fmt in ("time", "date-time") or clock
                      or any(w in described for w in _TIME_WORDS)):
        # a property named for a time ("time_period") or written as one (HH:MM) takes a clock
        # time as its own kind; the start or the end of a range, the property of that end
        prior = TYPED_PRIOR if fmt in ("time", "date-time") or "time" in words or clock \
            else 2.0
        end = range_end(words)
        for found_time in read.times:
            labelled = DATE_LABEL_BONUS if end and found_time.range_part == end else 0.0
            out += [Candidate(f, f, "time", prior + labelled, found_time.span)
                    for f in time_forms(found_time, schema_format=fmt)]
    if "language" in words or "lang" in words:
        out += [Candidate(m[0], m[0], "language", TYPED_PRIOR, m.span())
                for m in _LANGUAGE.finditer(request)]
    if wants_phone(words, schema):  # not a date's digits ("dec 10 2026")
        out += [c for c in phone_candidates(request, pattern, prior=TYPED_PRIOR)
                if not read.overlaps_when(c.span)]
    if fmt in WHEN_FORMATS or fmt == "email":
        return out
    for match in read.quoted:
        out += _quoted(match, near(match.span(), cues, request, before=True))
    clause = _AFTER_COLON.search(request)
    if clause and _TEXT_WORDS & set(words) and not read.quoted:
        out.append(Candidate(clause[1], clause[1], "quoted", CLAUSE_PRIOR, clause.span(1)))
    if _REASON_WORDS & set(words):
        out += [Candidate(m[2].strip(), m[2].strip(), "reason", TYPED_PRIOR, m.span(2))
                for m in _AFTER_BECAUSE.finditer(request)]
    for m in _NUMBERED.finditer(request):  # "check #5521": written to be copied
        labelled = near(m.span(), cues, request, before=True)
        out.append(Candidate(m[1], m[1], "id", LITERAL_PRIOR if labelled else LABEL_PRIOR,
                             m.span()))
    out += [Candidate(lit.text, lit.text, "literal",
                      LITERAL_PRIOR + (1.5 if near(lit.span, cues, request, before=True) else 0),
                      lit.span) for lit in read.literals]
    out += spans(read, cues, words, wants_date=wants_date, topic=topic)
    if pattern:
        out = [c for c in out if matches(pattern, c.text)] + [
            c for c in pattern_forms(out, pattern, prior=LITERAL_PRIOR)
            if not names_a_term(c.text)]  # "fall 2027" is no course code "FALL 2027"
        if is_structured(pattern):  # "STAT 2000" for `^[A-Z]{2,5}[ -][0-9]{3,4}$`: an id,
            # not a piece of a date ("dec 10 2026" is no phone number's "10 2026")
            out = [replace(c, kind="id", prior=max(c.prior, LITERAL_PRIOR))
                   if c.kind == "span" and not read.overlaps_when(c.span) else c for c in out]
    return out


def _quoted(match: re.Match[str], near: bool) -> list[Candidate]:
    """A quoted value, without a final period and (a sentence whose closing quote the
    request leaves out: the period is the quote's own) with it."""
    whole = next(g for g in match.groups() if g is not None).strip()
    text = whole.rstrip(".")
    if not text:
        return []
    prior = 3.0 + (1.5 if near else 0.0)
    out = [Candidate(text, text, "quoted", prior, match.span())]
    is_open = match[0][-1] not in "\"'”"
    if whole != text and is_open and len(text.split()) > 1:
        out.insert(0, Candidate(whole, whole, "quoted", prior + 0.5, match.span()))
    return out
