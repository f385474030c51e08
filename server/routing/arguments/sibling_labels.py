"""Values another property of the leaf labels, and values that say where something comes
from or goes: a request names each value's property near it ("the ID X", "from SFO to JFK"),
so a value another property's name labels (and this one's does not) is that property's, held
back here by SIBLING_PENALTY, and a value after "from" or "to" is raised for the property of
that direction by DIRECTION_BONUS."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from stackroute.runtime.schemas import value_checker
from stackroute.server.routing.arguments.candidate import Candidate
from stackroute.server.routing.arguments.cues import (
    cue_positions,
    joined_forms,
    label_positions,
    near,
    phrase_positions,
    property_words,
)
from stackroute.server.routing.arguments.numbers import written_as_money
from stackroute.server.routing.arguments.phones import wants_phone
from stackroute.server.routing.arguments.spans import ID_NAME_ENDINGS

SIBLING_PENALTY = 2.5  # a value the request labels with another property's name
_COPIED = frozenset(("id", "literal"))
# A property named or formatted for a date or a time: the one a date or a time may be labelled for
WHEN_WORDS = frozenset(("date", "time", "day", "deadline", "birthday", "datetime", "timestamp"))
WHEN_FORMATS = frozenset(("date", "date-time", "time"))
# Where a value comes from and where it goes: "from SFO to JFK", "from English to French"
DIRECTION_BONUS = 1.0
_FROM_WORDS = frozenset(("origin", "source", "departure", "sender", "src"))
_TO_WORDS = frozenset(("destination", "target", "arrival", "recipient", "dest"))
_FROM = re.compile(r"\bfrom\s+(?:the\s+)?$", re.IGNORECASE)
_TO = re.compile(r"\b(?:to|into)\s+(?:the\s+)?$", re.IGNORECASE)
# a name before "to" and another name: a route without "from" ("Gary to Houston"), whose
# first name is where from and the second where to
_ROUTE_TO = re.compile(r"\s+(?:to|->|→|–)\s+[A-Z0-9]")
_ROUTE_FROM = re.compile(r"\b[A-Z0-9][\w-]*\s+(?:to|->|→|–)\s+$")


def held_back(found: list[Candidate], request: str, cues: list[tuple[int, int]],
              words: list[str], siblings: Mapping[str, Mapping[str, Any]],
              forms: frozenset[str]) -> list[Candidate]:
    """`found` with the values another property's name labels (and this one's does not)
    lowered by SIBLING_PENALTY, and so the word spans that hold another property's name:
    the label of that property's value ("the subject" for `message`), not this one's.
    `siblings`: the leaf's other properties and their schemas."""
    own = {w[:4] for w in words}
    labels = {s: spans_of for s in siblings if (spans_of := label_of(request, s, own, forms))}
    others = sorted({span for spans_of in labels.values() for span in spans_of})
    if not others:
        return found

    # a value is labelled only by a sibling that can take it: one whose schema, its type aside
    # (a span "31.5 kg" is a number sibling's value as the request writes it), takes the value
    # ("Urgent priority, and use VH-0045" is no label of VH-0045 for an enum of priorities);
    # a date or a time by one that takes a date or a time ("data at 15:38" is no label of
    # 15:38 for `data_sources`), and one of those takes nothing else (its format lets a number
    # pass: "reading 44" is no `reading_time`), a phone number by one that takes a phone ("my
    # number is +353…" is no `account_number`), an amount of money by none named for an id
    # ("a check for $1.2k" is no `check_number`)
    fits = {s: value_checker({k: v for k, v in siblings[s].items() if k != "type"})
            for s in labels}  # only the siblings the request labels: a validator each
    names = {s: property_words(s, {}) for s in labels}

    def takes(sibling: str, c: Candidate) -> bool:
        w, schema = names[sibling], siblings[sibling]
        if c.kind in ("date", "time"):
            kind_fits = takes_when(w, schema)
        elif takes_when(w, schema) and schema.get("type") in ("string", None):
            kind_fits = False
        elif c.kind == "phone":
            kind_fits = wants_phone(w, schema)
        elif c.kind == "number" and c.span is not None and written_as_money(request, c.span):
            kind_fits = not ID_NAME_ENDINGS & set(w)
        else:
            kind_fits = True
        return kind_fits and (fits[sibling](c.value) or fits[sibling](c.text))

    def is_labelled(c: Candidate, span: tuple[int, int]) -> bool:
        if not near(span, others, request) or near(span, cues, request, before=True):
            return False
        return near(span, sorted(x for s, spans_of in labels.items() if takes(s, c)
                                 for x in spans_of), request)

    def holds_label(span: tuple[int, int], kind: str) -> bool:
        return kind == "span" and any(a < span[1] and span[0] < b for a, b in others)

    return [replace(c, prior=c.prior - SIBLING_PENALTY)
            if c.span is not None and (is_labelled(c, c.span) or holds_label(c.span, c.kind))
            else c for c in found]


def takes_when(words: list[str], schema: Mapping[str, Any]) -> bool:
    """Whether a property (its name's `words`, its `schema`) takes a date or a time: named
    for one (`due_date`) or formatted as one (`plannedStart`, a date-time)."""
    return bool(WHEN_WORDS & set(words)) or schema.get("format") in WHEN_FORMATS


def directed(found: list[Candidate], request: str, words: list[str]) -> list[Candidate]:
    """`found` with the values after "from", or names before "to" and another name ("Gary
    to Houston"), raised for a property that holds where something comes from (`origin`,
    `source_language`), and those after "to" or "into" for one that holds where it goes
    (`destination`, `target_language`), by DIRECTION_BONUS; a route's second name is held
    back by as much for the first."""
    held = set(words)
    is_from = bool(held & _FROM_WORDS)
    toward = _FROM if is_from else _TO if held & _TO_WORDS else None
    if toward is None:
        return found
    out = []
    for c in found:
        if c.span is not None and (toward.search(request[:c.span[0]]) or (
                is_from and c.text[:1].isupper() and _ROUTE_TO.match(request, c.span[1]))):
            c = replace(c, prior=c.prior + DIRECTION_BONUS)
        elif c.span is not None and is_from and _ROUTE_FROM.search(request[:c.span[0]]):
            c = replace(c, prior=c.prior - DIRECTION_BONUS)  # the route's second name
        out.append(c)
    return out


def shared_labelled(found: list[Candidate], request: str, name: str, words: list[str],
                    siblings: Mapping[str, Mapping[str, Any]], *,
                    prior: float) -> list[Candidate]:
    """`found` with a value written to be copied (an id, a literal) raised to `prior` where a
    word of the name that siblings share labels it and none of those siblings takes it (its
    schema refuses it): "plate is 7KDM392" for `license_plate` beside `plate_state`'s two
    letters. Siblings whose schemas are unknown take anything."""
    out = found
    for word in words:
        sharing = [s for s in siblings if s != name and word in property_words(s, {})]
        cues = cue_positions(request, [word]) if sharing else []
        if not cues:
            continue
        takes = [value_checker(siblings[s]) for s in sharing]
        out = [replace(c, prior=max(c.prior, prior))
               if c.kind in _COPIED and c.span is not None and near(c.span, cues, request)
               and not any(check(c.value) for check in takes) else c for c in out]
    return out


def label_of(request: str, sibling: str, own: set[str],
              forms: frozenset[str]) -> list[tuple[int, int]]:
    """Where the request labels `sibling`: its words that are not this property's (`own`,
    4-letter stems), each run on over the sibling's words right after it ("fat content at"
    for fat_content beside protein_content: "content" is no label of its own here), and its
    name as one word where this property's (`forms`) is not that word."""
    theirs = property_words(sibling, {})
    if not theirs:  # a name of function words only: "as of" for `as_of`
        return phrase_positions(request, sibling)
    joined = joined_forms(sibling)
    return label_positions(request, [w for w in theirs if w[:4] not in own], theirs,
                           joined=joined - forms, unless=forms - joined)
