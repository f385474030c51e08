"""Codes a property's description explains, for the request that says what the code means.

A description may list a property's codes with their meanings: "Three-letter site code: NWK
(Newark), DAL (Dallas), ONT (Ontario airport)", "Newark (NWK), Dallas (DAL)" or "NWK = Newark,
DAL = Dallas". A request names the place, not its code ("ship it from our Dallas site", "the
Ontario dock"): the code whose meaning the request says is the value. A meaning is said whole,
or by a word of it that no other meaning holds (four letters or more, plurals folded: "the
airport dock" for "Ontario airport"). Two codes at least make a list (one code in parentheses
is an example, not a table); a code is written in capitals, digits allowed, at most ten long.

>>> schema = {"type": "string", "description": "Site: NWK (Newark), DAL (Dallas), "
...           "ONT (Ontario airport)."}
>>> [c.value for c in described_code_candidates(schema, "move 40 units from the airport "
...                                             "dock to Dallas", prior=3.0)]
['ONT', 'DAL']
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from stackroute.server.embeddings.words import singular
from stackroute.server.routing.arguments.candidate import Candidate
from stackroute.server.routing.arguments.enums import own_words

_CODE = r"[A-Z][A-Z0-9_-]{1,9}"
_MEANING = r"[A-Za-z][A-Za-z0-9 '&./-]{0,58}?"
# "NWK (Newark)", "Newark (NWK)", "NWK = Newark" / "NWK: Newark" / "NWK - Newark"
_CODE_FIRST = re.compile(rf"(?<![\w-])(?P<code>{_CODE})\s*\((?P<meaning>{_MEANING})\)")
_MEANING_FIRST = re.compile(rf"(?:^|[,;:(]\s*|\bor\s+|\band\s+)(?P<meaning>{_MEANING})\s*"
                            rf"\((?P<code>{_CODE})\)")
_EQUALS = re.compile(rf"(?<![\w-])(?P<code>{_CODE})\s*(?:=|:|\s[-–]\s)\s*"
                     rf"(?P<meaning>{_MEANING})(?=\s*(?:[,;)]|\.(?:\s|$)|$|\s(?:or|and)\s))")
_WORD = re.compile(r"[a-z][a-z0-9']*")


def described_codes(description: str) -> dict[str, str]:
    """The codes `description` explains, each with its meaning (in the description's order);
    none where it explains fewer than two.

    >>> described_codes("Shift: AM = morning, PM = evening, NT = overnight")
    {'AM': 'morning', 'PM': 'evening', 'NT': 'overnight'}
    >>> described_codes("Warehouse (WH1) or depot (DP2)")
    {'WH1': 'Warehouse', 'DP2': 'depot'}
    >>> described_codes("A location code such as NWK (Newark).")
    {}
    """
    for pattern in (_CODE_FIRST, _MEANING_FIRST, _EQUALS):
        pairs: dict[str, str] = {}
        for match in pattern.finditer(description):
            code, meaning = match["code"], match["meaning"].strip(" .")
            if any(c.isalpha() for c in code) and not meaning.isupper() and meaning:
                pairs.setdefault(code, meaning)
        if len(pairs) >= 2 and len(set(pairs.values())) == len(pairs):
            return pairs
    return {}


def described_code_candidates(schema: Mapping[str, Any], text: str, *,
                              prior: float) -> list[Candidate]:
    """The codes of the property's description (`described_codes`) whose meanings `text`
    says, at `prior`, in the request's order."""
    description = schema.get("description")
    pairs = described_codes(description) if isinstance(description, str) else {}
    if not pairs:
        return []
    lowered = text.lower()
    own = own_words(pairs)
    found = []
    for code, meaning in pairs.items():
        span = _whole(meaning.lower(), lowered)
        if span is None:
            span = next((m.span() for m in _WORD.finditer(lowered)
                         if singular(m[0]) in own[code]), None)
        if span is not None:
            found.append(Candidate(code, code, "code", prior, span))
    return sorted(found, key=lambda c: c.span or (0, 0))


def _whole(phrase: str, lowered: str) -> tuple[int, int] | None:
    found = re.search(rf"(?<![\w-]){re.escape(phrase)}(?![\w-])", lowered)
    return found.span() if found else None
