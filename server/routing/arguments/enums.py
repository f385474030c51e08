"""Enum values the request says.

A word value is said by its words ("burglar alarm" for `burglar_alarm`; each word whole, by
its first five letters, or a short word with a short ending), a number value by the request's
numbers ("2,500" is 2500, not the word "500"), a value that is a function word only as the
schema writes it ("A", a DNS record type, not the article), a file format by the application
that writes it ("as an Excel file" for xlsx). A value the request turns from
("instead of quarterly", "rather than", "switch from quarterly to …") is held back where it
says another, as is one the request corrects ("high priority, actually no, make it
urgent": `corrections.py`), and so is a word value that is the name of another property of
the leaf, owned or counted ("my *email* changed" names the `email` property, not the channel
`email`; "alerts by email" is the channel). With no value said, a value of several words the
request says one of, a word no other value holds, is offered first ("the original card" for
original_payment, PARTLY_PRIOR), and every other value below zero (the model's choice, or none).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any, TypeVar

from stackroute.server.embeddings.abbreviations import is_shorthand
from stackroute.server.embeddings.words import singular, split_name
from stackroute.server.routing.arguments.candidate import Candidate
from stackroute.server.routing.arguments.corrections import corrections
from stackroute.server.routing.arguments.cues import STOPWORDS, near, property_words
from stackroute.server.routing.arguments.request_text import RequestText

SAID_PRIOR = 2.0  # an enum value the request says
UNSAID_PRIOR = -1.0  # every value, where the request says none
PARTLY_PRIOR = 1.0  # a value of several words the request says one of, its own (`_partly_said`)
HELD_PRIOR = 0.0  # a value said but turned from, or another property's name
K = TypeVar("K")
_WORD = re.compile(r"[a-z][a-z0-9']*")
_MIN_OWN = 4  # a value's own word: four letters or more
# values that say how many of something the request goes on to name, not of what
_DETERMINERS = frozenset(("all", "any", "some", "each", "every", "both"))
# A file format is said by the application that writes it: "as an Excel file" for xlsx, "a
# Word doc" for docx (the word alone is too common); the older format only where the enum
# lacks the newer one.
_EXCEL = re.compile(r"\b(?:ms\s+)?excel\b", re.IGNORECASE)
_WORD_DOC = re.compile(r"\b(?:ms\s+word|word\s+(?:doc|docs|document|documents|file|files))\b",
                       re.IGNORECASE)
_POWERPOINT = re.compile(r"\bpower\s*point\b", re.IGNORECASE)
_BY_APPLICATION = {"xlsx": _EXCEL, "xls": _EXCEL, "docx": _WORD_DOC, "doc": _WORD_DOC,
                   "pptx": _POWERPOINT, "ppt": _POWERPOINT}
_NEWER = {"xls": "xlsx", "doc": "docx", "ppt": "pptx"}
# a word that names another property is that property's label where something owns or
# counts it ("my email changed", "a new email a@b.ie"), not after "by" ("alerts by email")
_OWNED = re.compile(r"\b(?:my|your|his|her|their|our|the|new|a|an|its)\s+(?:new\s+)?$",
                    re.IGNORECASE)
_TOKEN = re.compile(r"[a-z0-9]+")
_TURNED_FROM = re.compile(r"\b(?:instead\s+of|rather\s+than|not|from)\s+(?:the\s+|a\s+|an\s+)?$",
                          re.IGNORECASE)


def enum_candidates(values: list[Any], read: RequestText, *,
                    siblings: Sequence[str] = (),
                    cues: list[tuple[int, int]] | None = None) -> list[Candidate]:
    """The enum `values` the request says, at SAID_PRIOR (HELD_PRIOR where held back); else
    those it says partly at PARTLY_PRIOR and every other value at UNSAID_PRIOR. A value that
    is a function word is said as the schema writes it ("A" of a DNS record type, "up" of a
    direction), and a determiner only where the property's name labels it (`cues`, as
    `cues.near` reads them): "on all channels" says `all`, "all locs" does not."""
    request = read.text
    lowered = request.lower()
    numbers = [n for n in read.numbers if not any(a <= n.span[0] < b for a, b in read.when)]
    named = {" ".join(property_words(s, {})) for s in siblings}
    tokens = [(m[0], m.span()) for m in _TOKEN.finditer(lowered)]  # read once for every value
    # two words written apart that a value writes as one: "2 mL cryovial" for cryovial_2ml
    joined = [(a + b, (sa[0], sb[1])) for (a, sa), (b, sb) in itertools.pairwise(tokens)
              if lowered[sa[1]:sb[0]] in (" ", "-") and lowered[sa[0] - 1:sa[0]] not in (".", ",")]
    said: list[tuple[Any, tuple[int, int] | None, bool]] = []  # value, where, another's name
    for value in values:
        if isinstance(value, int | float) and not isinstance(value, bool):
            said += [(value, n.span, False) for n in numbers if n.value == value][:1]
            continue
        text = str(value)
        phrase = re.sub(r"[_\-]+", " ", text.lower()).strip()
        if phrase in STOPWORDS:  # "A" (a DNS record type) is not the article
            found = re.search(rf"\b{re.escape(text)}\b", request)
            span = found.span() if found and (text not in _DETERMINERS or near(
                found.span(), cues or [], request, before=True)) else None
        else:
            span = _said(phrase, lowered, tokens, joined) if phrase else None
        if span is None and phrase in _BY_APPLICATION and _NEWER.get(phrase) not in values:
            found = _BY_APPLICATION[phrase].search(request)  # "as an Excel file": xlsx
            span = found.span() if found else None
        if span is not None:
            owned = _OWNED.search(request[:span[0]]) is not None
            said.append((value, span, phrase in named and owned))
    if not said:
        # a word of a compound is none of its own: "double-checked" says no double room
        alone = [(t, (a, b)) for t, (a, b) in tokens
                 if lowered[a - 1:a] != "-" and lowered[b:b + 1] != "-"]
        partly = _partly_said(values, alone, {w for s in siblings for w in split_name(s)})
        return [Candidate(v, option_text(v), "enum", prior=PARTLY_PRIOR) for v in partly] \
            + [Candidate(v, option_text(v), "enum", prior=UNSAID_PRIOR)
               for v in values if v not in partly]
    turned = {k for k, (_, span, _) in enumerate(said)
              if span is not None and _TURNED_FROM.search(request[:span[0]])}
    if len(turned) == len(said):
        turned = set()  # nothing else said: "not quarterly" alone is still about quarterly
    placed = [k for k, (_, span, _) in enumerate(said) if span is not None]
    turned |= {placed[i] for i in corrections([said[k][1] or (0, 0) for k in placed], request)}
    return [Candidate(value, option_text(value), "enum",
                      HELD_PRIOR if k in turned or is_name else SAID_PRIOR)
            for k, (value, _, is_name) in enumerate(said)]


def _said(phrase: str, lowered: str, tokens: Sequence[tuple[str, tuple[int, int]]],
          joined: Sequence[tuple[str, tuple[int, int]]]) -> tuple[int, int] | None:
    """Where the request says a word value: the phrase whole, or each of its words whole, by
    its first five letters, (three letters or more) with an ending of at most two, or in
    shorthand ("chk" for check: `abbreviations.is_shorthand`), or two words written as one
    ("2 mL" for 2ml) (the place of the first); `tokens`: the words of `lowered` and where they
    stand, `joined`: each two of them a space or a dash apart, as one word."""
    found = re.search(rf"\b{re.escape(phrase)}\b", lowered)
    if found:
        return found.span()
    places = []
    for part in phrase.split():
        place = next((span for token, span in joined if token == part), None) \
            or next((span for token, span in tokens if token == part
                      or (len(part) >= 5 and token[:5] == part[:5])
                      or (len(part) >= 3 and token.startswith(part)
                          and len(token) - len(part) <= 2)
                      or is_shorthand(token, part)), None)
        if place is None:
            return None
        places.append(place)
    return min(places) if places else None


def _partly_said(values: list[Any], tokens: Sequence[tuple[str, tuple[int, int]]],
                 named: set[str]) -> list[Any]:
    """The values of several words the request says a word of that no other value holds
    (`own_words`, none of another property's name, `named`; said whole, plurals folded):
    "to the original card" for original_payment, where no other value is original; not
    "text the patient" for patient_request beside notify_patient, nor "the insured" for
    evidence_of_insurance."""
    own = own_words({str(v): str(v) for v in values}, excluded=named)
    said = {singular(t) for t, _ in tokens}
    return [v for v in values  # a value of one word is said whole or not at all
            if len(re.sub(r"[_\-]+", " ", str(v)).split()) >= 2 and own[str(v)] & said]


def own_words(phrases: Mapping[K, str], *, excluded: Collection[str] = ()) -> dict[K, set[str]]:
    """Each phrase's content words (four letters or more, no function word, none of
    `excluded`; singular, underscores and dashes as spaces) that no other phrase holds: the
    words that say it and it alone.

    >>> own_words({"a": "original_payment", "b": "gift_card", "c": "original_card"})
    {'a': {'payment'}, 'b': {'gift'}, 'c': set()}
    """
    words = {key: {singular(w) for w in _WORD.findall(re.sub(r"[_\-]+", " ", text.lower()))
                   if len(w) >= _MIN_OWN and w not in STOPWORDS and w not in excluded}
             for key, text in phrases.items()}
    return {key: mine - set().union(*(w for k, w in words.items() if k != key))
            for key, mine in words.items()}


def enum_matched(found: list[Candidate]) -> bool:
    """Whether the enum candidates are words of the request (not the whole enum as a menu)."""
    return any(c.kind == "enum" and c.prior > 0 for c in found)


def option_text(value: Any) -> str:
    """An enum value as a menu option: a string as it is, anything else as JSON."""
    return value if isinstance(value, str) and value else json.dumps(value)
