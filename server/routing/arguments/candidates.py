"""Value candidates: for one property of a leaf's schema, the values the request actually
holds, each with a prior (a logit bias the model's constrained choice starts from).

Numbers come normalised ("5k" → 5000, "$1.2M" → 1200000), dates and times in the schema's
format, enum values matched to the request's words, e-mails, phone numbers, ids, quoted text,
and word spans that neither start nor end with a function word. Nothing is invented: every
candidate is in the request (an enum value or a normalised form of it)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from stackroute.server.routing.arguments.dates import date_forms, find_dates, find_times, time_forms
from stackroute.server.routing.arguments.literals import Literal, find_literals, labels_literal
from stackroute.server.routing.arguments.numbers import find_numbers

MAX_SPAN_WORDS = 6
MAX_CANDIDATES = 48
STOPWORDS = frozenset("""a an the of to in on at for from by with and or but is are be as
into about than then that this these those it its my me i you your we our please can could
would will shall should do does did get give show tell find set make let up out over under all
any some what which who whom whose where when how if via per using use""".split())  # noqa: SIM905
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_PHONE = re.compile(r"(?<![\w+])\+?\d[\d ().-]{6,}\d(?!\w)")
_QUOTED = re.compile(r"\"([^\"]+)\"?|'([^']+)'|“([^”]+)”")
_WORD = re.compile(r"[\w$€£@#][\w.@/+'’#-]*[\w%]|[\w$€£%]")
_IDLIKE = re.compile(r"(?=.*\d)(?=.*[A-Za-z])[A-Za-z0-9_#-]{3,}|#?\d{4,}")
_NAME_JOINERS = frozenset(("of", "the", "and", "de", "&"))
_DATE_WORDS = ("date", "day", "month", "deadline", "birthday", "when", "start", "end", "until",
               "since")
_TIME_WORDS = ("time", "hour", "start", "end", "when")
_PLACE_WORDS = frozenset(("location", "city", "country", "region", "place", "address", "area",
                          "destination", "venue", "site", "state", "town"))
_LANGUAGE = re.compile(r"\b(?:English|French|Spanish|German|Italian|Portuguese|Dutch|Russian|"
                       r"Chinese|Mandarin|Cantonese|Japanese|Korean|Arabic|Hindi|Bengali|"
                       r"Turkish|Polish|Greek|Hebrew|Swedish|Vietnamese|Thai|Indonesian|"
                       r"Swahili|Urdu|Persian)\b")
# between a value and its property's name after it: nothing ("the Sales team"), or "as"
# ("PayPal as your payment method")
_LABELS_BEFORE = re.compile(r"(?:as(?: (?:the|your|a|an|my|our))?)?")
_PLACE_PREPOSITIONS = frozenset(("in", "at", "near", "from", "of", "to", "around", "within"))
# Words that say what the request asks, not what it asks about ("information on", "the
# specified address"): a span of these alone is rarely a value.
FILLER = frozenset("""information info details detail specified specific certain given
particular related relevant appropriate according following respective provided corresponding
desired requested specifically regarding needed required id provide retrieve obtain fetch
calculate compute determine check tell explain describe perform create generate analyze
analyse assess evaluate estimate estimated search look""".split())  # noqa: SIM905
SPAN_WORD_COST = 0.4  # prior per extra word of a span: shorter values first
TOPIC_PENALTY = 1.5  # a span of the leaf's own words (filler between): the ask restated
FILLER_PENALTY = 2.5  # a span of filler alone: never a value, below even the leaf's words
EDGE_PENALTY = 1.0  # a longer span that starts or ends with one ("restoration in the tropical")
OPENING_PENALTY = 2.5  # a span from the request's first word (its verb) is rarely a value
CUT_PENALTY = 0.5  # a lower-case span whose noun phrase starts a word earlier ("rainforest"
#                   of "tropical rainforest"; not "2.3" of "version 2.3"): the phrase first
SIBLING_PENALTY = 2.5  # a value the request labels with another property's name
LITERAL_PRIOR = 3.0  # a URL, IP address, file name or path: written to be copied
LABEL_PENALTY = 2.0  # the words naming a literal right after them ("the URL", "IP address")


@dataclass(frozen=True)
class Candidate:
    value: Any  # the JSON value the argument takes
    text: str  # the option the model chooses (unique per property)
    kind: str  # number | date | time | enum | email | phone | id | quoted | literal | span
    #            | boolean
    prior: float = 0.0  # logit bias for the constrained choice
    span: tuple[int, int] | None = None  # where the request holds it (None: not literally)


def property_words(name: str, schema: Mapping[str, Any]) -> list[str]:
    """The property's own words: its name split at _ and camelCase (lower case)."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name).replace("_", " ").replace("-", " ")
    return [w.lower() for w in spaced.split() if w and w.lower() not in STOPWORDS]


def _cue_positions(request: str, words: list[str]) -> list[tuple[int, int]]:
    """Where the request names the property (a word of its name, 4-letter stem): each such
    word's span, so a value right after it ("with ID X", "age of 63") or right before it
    ("the Sales team", "the 'income' dataset") can be favoured."""
    out = []
    for match in re.finditer(r"[A-Za-z]+", request):
        word = match[0].lower()
        if any(len(w) >= 2 and (word == w or (len(w) >= 4 and word[:4] == w[:4]))
               for w in words):
            out.append(match.span())
    return out


def _near(span: tuple[int, int], cues: list[tuple[int, int]], request: str, *,
          before: bool = False) -> bool:
    """A cue word ends at most a few function words before `span`; with `before`, also: a
    cue word follows `span` directly (the value names its kind's noun: "the Sales team") or
    after "as" ("PayPal as your payment method")."""
    for start, end in cues:
        if before and span[1] <= start and _LABELS_BEFORE.fullmatch(
                request[span[1]:start].strip(" \"'“”‘’").lower()):
            return True
        if end <= span[0]:
            between = request[end:span[0]].lower().split()
            between = [w.strip(".,:;\"'()[]") for w in between]
            if len(between) <= 3 and all(w in STOPWORDS or w in ("is", "named", "called", "id",
                                                                  "number", "no", "#")
                                         for w in between if w):
                return True
    return False


def candidates(name: str, schema: Mapping[str, Any], request: str, *,
               siblings: Sequence[str] = (), topic: frozenset[str] = frozenset(),
               ) -> list[Candidate]:
    """The values `request` holds for property `name` (its JSON schema `schema`), most
    plausible first, unique by text, at most MAX_CANDIDATES. `siblings`: the leaf's other
    properties; a value the request labels with a sibling's name ("the ID X" for `post_id`)
    and not with this property's is held back (SIBLING_PENALTY). `topic`: the leaf's own
    words (`topic_words`); a plain span of them, or of FILLER, is the request restating the
    tool ("assess the supply chain *risk*"), held back by TOPIC_PENALTY."""
    kind = schema.get("type")
    words = property_words(name, schema)
    shared = {w for s in siblings for w in property_words(s, {})}
    # a word the siblings share ("number" of policy_number and flight_number) labels neither
    cues = _cue_positions(request, [w for w in words if w not in shared] or words)
    if "enum" in schema:
        found = _enum_candidates(schema["enum"], request)
    elif kind == "boolean":
        found = [Candidate(True, "true", "boolean"), Candidate(False, "false", "boolean")]
    elif kind in ("integer", "number"):
        found = _number_candidates(kind, request, cues, words)
    elif kind in ("string", None):
        found = _string_candidates(name, schema, request, cues, words, topic)
    else:
        found = []  # arrays and objects: the model writes them under the schema (fallback)
    found = _held_back(found, request, cues, words, siblings)
    unique: dict[str, Candidate] = {}
    for candidate in sorted(found, key=lambda c: -c.prior):
        if candidate.text and not candidate.text[0].isspace():
            unique.setdefault(candidate.text, candidate)
    return list(unique.values())[:MAX_CANDIDATES]


def _held_back(found: list[Candidate], request: str, cues: list[tuple[int, int]],
               words: list[str],
               siblings: Sequence[str]) -> list[Candidate]:
    """`found` with the values another property's name labels (and this one's does not)
    lowered by SIBLING_PENALTY."""
    own = {w[:4] for w in words}
    other_words = sorted({w for s in siblings for w in property_words(s, {})
                          if w[:4] not in own})
    if not other_words:
        return found
    others = _cue_positions(request, other_words)
    return [replace(c, prior=c.prior - SIBLING_PENALTY)
            if c.span is not None and _near(c.span, others, request)
            and not _near(c.span, cues, request, before=True) else c for c in found]


def _enum_candidates(values: list[Any], request: str) -> list[Candidate]:
    lowered = request.lower()
    tokens = set(re.findall(r"[a-z0-9]+", lowered))
    matched = []
    for value in values:
        text = str(value) if not isinstance(value, str) else value
        phrase = re.sub(r"[_\-]+", " ", text.lower()).strip()
        parts = phrase.split()
        if phrase and (re.search(rf"\b{re.escape(phrase)}\b", lowered) or (parts and all(
                p in tokens or any((t[:5] == p[:5] and len(p) >= 5)
                                   or (len(p) >= 3 and t.startswith(p) and len(t) - len(p) <= 2)
                                   for t in tokens)
                for p in parts))):
            matched.append(Candidate(value, _option_text(value), "enum", prior=2.0))
    if matched:
        return matched
    return [Candidate(v, _option_text(v), "enum", prior=-1.0) for v in values]


def enum_matched(found: list[Candidate]) -> bool:
    """Whether the enum candidates are words of the request (not the whole enum as a menu)."""
    return any(c.kind == "enum" and c.prior > 0 for c in found)


def _option_text(value: Any) -> str:
    import json

    return value if isinstance(value, str) and value else json.dumps(value)


def _number_candidates(kind: str, request: str, cues: list[tuple[int, int]],
                       words: list[str]) -> list[Candidate]:
    blocked = [d.span for d in find_dates(request)] + [t.span for t in find_times(request)]
    money = any(w in ("amount", "price", "cost", "budget", "salary", "fee", "total", "revenue",
                      "income", "balance", "payment") for w in words)
    out = []
    for number in find_numbers(request):
        if any(a <= number.span[0] < b for a, b in blocked):
            continue
        value = number.value
        if kind == "integer" and isinstance(value, float):
            continue
        prior = 2.0 if _near(number.span, cues, request, before=True) else 0.0
        prior += 1.0 if money and number.is_money else 0.0
        text = str(value) if not isinstance(value, float) else repr(value)
        out.append(Candidate(value, text, "number", prior=prior, span=number.span))
    return out


def _string_candidates(name: str, schema: Mapping[str, Any], request: str,
                       cues: list[tuple[int, int]], words: list[str],
                       topic: frozenset[str] = frozenset()) -> list[Candidate]:
    fmt = schema.get("format")
    pattern = schema.get("pattern")
    described = " ".join(words) + " " + str(schema.get("description", "")).lower()
    out: list[Candidate] = []
    if fmt == "email" or "email" in words or "mail" in words:
        out += [Candidate(m[0], m[0], "email", 3.0) for m in _EMAIL.finditer(request)]
        if fmt == "email":
            return out
    wants_date = fmt in ("date", "date-time") or any(w in described for w in _DATE_WORDS)
    if wants_date:
        for found in find_dates(request):
            prior = 3.0 if fmt in ("date", "date-time") or "date" in described else 1.0
            forms = date_forms(found, schema_format=fmt)
            if pattern and found.year is not None:
                forms.append(found.iso[:7])  # a month pattern (YYYY-MM) takes the month
            out += [Candidate(f, f, "date", prior) for f in forms]
    if fmt in ("time", "date-time") or any(w in described for w in _TIME_WORDS):
        # a property named for a time ("time_period") takes a clock time as its own kind
        prior = 3.0 if fmt in ("time", "date-time") or "time" in words else 2.0
        for found_time in find_times(request):
            out += [Candidate(f, f, "time", prior, found_time.span)
                    for f in time_forms(found_time, schema_format=fmt)]
    if "language" in words or "lang" in words:
        out += [Candidate(m[0], m[0], "language", 3.0, m.span())
                for m in _LANGUAGE.finditer(request)]
    if "phone" in words or fmt == "phone":
        out += [Candidate(m[0].strip(), m[0].strip(), "phone", 3.0)
                for m in _PHONE.finditer(request)]
    if fmt in ("date", "date-time", "time", "email"):
        return out
    for match in _QUOTED.finditer(request):
        out += _quoted(match, _near(match.span(), cues, request, before=True))
    literals = find_literals(request)
    out += [Candidate(lit.text, lit.text, "literal",
                      LITERAL_PRIOR + (1.5 if _near(lit.span, cues, request, before=True) else 0),
                      lit.span) for lit in literals]
    out += _spans(request, cues, words, literals, wants_date=wants_date, topic=topic)
    if pattern:
        out = [c for c in out if _matches(pattern, c.text)]
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


def topic_words(name: str, description: str) -> frozenset[str]:
    """A leaf's own words, 4-letter stems: its name split at _ and camelCase, and its
    description's words, function words left out."""
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name).replace("_", " ") + " " + description
    return frozenset(w.lower()[:4] for w in re.findall(r"[A-Za-z]+", text)
                     if len(w) >= 3 and w.lower() not in STOPWORDS)


def _spans(request: str, cues: list[tuple[int, int]], words: list[str],
           literals: list[Literal], *, wants_date: bool = False,
           topic: frozenset[str] = frozenset()) -> list[Candidate]:
    """Word spans; none that cuts into a date for a property that wants a date (it has the
    date's normalised forms instead: "January 7" is not a check-out date). `literals`: the
    request's (`find_literals`), whose labels are held back."""
    tokens = [(m[0].rstrip(".,;:!?'\"’"), m.start()) for m in _WORD.finditer(request)]
    tokens = [(t, start) for t, start in tokens if t]
    dates = [d.span for d in find_dates(request)]
    quotes = [m.span() for m in _QUOTED.finditer(request)]
    own = {w[:4] for w in words}

    # each sentence's first word: its verb ("Choose PayPal as ..."), capitalised for the
    # sentence, not for a name
    starts = {k for k, (_, start) in enumerate(tokens) if k == 0 or re.search(
        r"[.!?]", request[tokens[k - 1][1] + len(tokens[k - 1][0]):start])}

    def is_capital(k: int) -> bool:
        return 0 <= k < len(tokens) and k not in starts and tokens[k][0][:1].isupper()

    is_id = any(w in ("id", "code", "number", "account", "identifier", "key", "sku", "no")
                for w in words)
    is_place = any(w in _PLACE_WORDS for w in words)
    out = []
    for i in range(len(tokens)):
        for j in range(i, min(len(tokens), i + MAX_SPAN_WORDS)):
            first, last = tokens[i][0], tokens[j][0]
            if first.lower() in STOPWORDS or last.lower() in STOPWORDS:
                continue
            if i in starts and j == i and first[:1].isupper() and len(tokens) > 1:
                continue  # a sentence's opening verb ("Send", "Find")
            start = tokens[i][1]
            end = tokens[j][1] + len(last)
            if last[-2:].lower() in ("'s", "’s") and len(last) > 2:
                end -= 2  # "John Smith's traits": the name, not its possessive
            if re.search(r"[.;!?]\s|,\s|[()\[\]]", request[start:end]):
                continue  # spans stay inside one clause (and out of brackets)
            text = request[start:end]
            if any(q in text for q in "\"“”") or all(
                    t.lower() in STOPWORDS or t.lower()[:4] in own for t, _ in tokens[i:j + 1]):
                continue  # a quote's edge, or the property's own name ("ID", "post ID")
            span_words = [t for t, _ in tokens[i:j + 1]]
            # a name: capitalised words, joiners between, and a number right after one of
            # its capitalised words ("Bank of America", "Boeing 777", "BMW 3 Series")
            capitalised = i not in starts and span_words[0][:1].isupper() \
                and span_words[0].lower() not in FILLER and all(
                t[:1].isupper() or t.lower() in _NAME_JOINERS
                or (k > 0 and t.isdigit() and span_words[k - 1][:1].isupper())
                for k, t in enumerate(span_words))
            prior = -SPAN_WORD_COST * (j - i)
            fillers = [t.lower() in STOPWORDS or t.lower() in FILLER for t in span_words]
            asks = [f or t.lower()[:4] in topic for f, t in zip(fillers, span_words,
                                                                 strict=True)]
            if all(fillers):  # "the specified", "ID": whatever the case
                prior -= FILLER_PENALTY
            elif capitalised:
                pass  # a name is a value, even one made of the leaf's words
            elif all(asks):
                prior -= TOPIC_PENALTY
            elif asks[0] or asks[-1]:
                prior -= EDGE_PENALTY
            if first.isalpha() and first.islower() and i not in starts \
                    and _modifies(tokens, i, request, topic):
                prior -= CUT_PENALTY
            if i in starts and len(tokens) > 1 and j > i and not first[:1].isdigit():
                prior -= OPENING_PENALTY  # "Retrieve information about": the ask, not a value
            if capitalised:  # a whole name beats its parts ("New York", not "New")
                prior += 1.5 + 0.6 * (j - i) - (1.0 if is_capital(j + 1) or is_capital(i - 1)
                                               else 0.0)
            names_its_kind = capitalised and j > i and span_words[-1].lower()[:4] in own
            if names_its_kind:
                prior += 2.0  # a name ending with its kind: "the Supreme Court" for `court`
            elif any(t.lower()[:4] in own for t in span_words):
                prior -= 1.5  # "ID X": the value without its label
            if wants_date and any(a < end and start < b for a, b in dates):
                continue
            if any(a <= start and end <= b for a, b in quotes):
                prior -= 2.0  # a piece of a quoted value (the whole quote is offered)
            if any(a < end and start < b for a, b in dates):
                prior -= 3.0  # dates are offered normalised where a property wants one
            kind = "id" if _IDLIKE.fullmatch(text) else "span"
            if is_place and _after_place_word(request, start):
                prior += 1.0  # "the water quality of the lake", "rooms in New York"
            if _IDLIKE.fullmatch(text):
                prior += 2.0 if is_id else 0.5
            if labels_literal(request, end, literals) and not any(
                    a < end and start < b for a, b in (lit.span for lit in literals)):
                prior -= LABEL_PENALTY
            prior += 2.0 if _near((start, end), cues, request, before=True) else 0.0
            out.append(Candidate(text, text, kind, prior, (start, end)))
    return out


def _modifies(tokens: list[tuple[str, int]], i: int, request: str,
              topic: frozenset[str]) -> bool:
    """Whether the word before token `i`, in the same clause, is a lower-case content word
    that is not the leaf's own: the span cuts a noun phrase after its first word."""
    if i == 0:
        return False
    word, start = tokens[i - 1]
    lowered = word.lower()
    if re.search(r"[.,;:!?()\[\]\"“”]", request[start + len(word):tokens[i][1]]):
        return False
    return word.islower() and word.isalpha() and lowered not in STOPWORDS \
        and lowered not in FILLER and lowered[:4] not in topic


def _after_place_word(request: str, start: int) -> bool:
    """A place preposition (and an article) right before `start`: "in New York"."""
    before = request[:start].lower().split()[-2:]
    if before and before[-1] in ("the", "a", "an"):
        before = before[:-1]
    return bool(before) and before[-1] in _PLACE_PREPOSITIONS


def _matches(pattern: str, text: str) -> bool:
    try:
        return re.search(pattern, text) is not None
    except re.error:
        return True
