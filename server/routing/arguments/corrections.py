"""Values the request corrects as it goes: "add the 4,500 points. Wait, make that 4,800",
"the high control came in at 38.7, sorry, 37.8", "2 nights... no, it was 3", "high priority,
actually no, make it urgent". People type as they think; the value a correction gives is the
one meant, and the value it corrects is held back (CORRECTED_PENALTY) for the property whose
candidates hold both.

A value is corrected by a later value of the same kind where the words between them are few
(at most MAX_BETWEEN characters) and hold a correction's words ("actually", "sorry", "wait",
"make that", "make it", "I mean", "no," "it was"), and where both are numbers, no unit after
each names two different things ("2 rooms, actually make it 3 nights" corrects nothing).
"X, not Y" keeps X: it is no correction of X.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from stackroute.server.routing.arguments.candidate import Candidate
from stackroute.server.routing.arguments.numbers import UNIT_AFTER

CORRECTED_PENALTY = 3.0  # below the value that corrects it, whatever labels either
MAX_BETWEEN = 48
_CORRECTION = re.compile(
    r"\b(?:actually|sorry|oops|wait|make\s+(?:that|it)|i\s+mean|correction|scratch\s+that"
    r"|it\s+(?:was|is|'s)\s+actually|no\s+it\s+(?:was|is|'s))\b|\bno\s*[,.!-]", re.IGNORECASE)


def corrections(spans: Sequence[tuple[int, int]], text: str) -> set[int]:
    """The indexes of `spans` (a property's values, where the request writes them) that a
    later one corrects.

    >>> text = "add the 4,500 points he's owed? Wait, make that 4,800"
    >>> corrections([(8, 13), (48, 53)], text)
    {0}
    >>> corrections([(0, 1), (21, 22)], "2 rooms, actually make it 3 nights")
    set()
    """
    out = set()
    for i, (_, end) in enumerate(spans):
        for later_start, later_end in spans:
            if later_start < end or spans[i] == (later_start, later_end):
                continue
            between = text[end:later_start]
            if len(between) <= MAX_BETWEEN and _CORRECTION.search(between) \
                    and not _other_things(text, end, later_end):
                out.add(i)
                break
    return out


def corrected(found: list[Candidate], text: str) -> list[Candidate]:
    """`found` with each value a later value of the same kind corrects lowered by
    CORRECTED_PENALTY (`corrections`); values without a span are left as they are.

    >>> found = [Candidate(38.7, "38.7", "number", 2.0, (29, 33)),
    ...          Candidate(37.8, "37.8", "number", 0.0, (42, 46))]
    >>> [c.prior for c in corrected(found, "the high control came in at 38.7, sorry, 37.8")]
    [-1.0, 0.0]
    """
    placed = [k for k, c in enumerate(found) if c.span is not None]
    by_kind: dict[str, list[int]] = {}
    for k in placed:
        by_kind.setdefault(found[k].kind, []).append(k)
    lowered: set[int] = set()
    for ks in by_kind.values():
        ks = sorted(ks, key=lambda k: found[k].span or (0, 0))
        spans = [found[k].span or (0, 0) for k in ks]
        lowered |= {ks[i] for i in corrections(spans, text)
                    if any(found[k].value != found[ks[i]].value for k in ks[i + 1:])}
    return [replace(c, prior=c.prior - CORRECTED_PENALTY) if k in lowered else c
            for k, c in enumerate(found)]


def _other_things(text: str, end: int, later_end: int) -> bool:
    """Whether the words right after two numbers name different things ("2 rooms … 3
    nights"); False where either has none after it, or where they are not numbers."""
    first, second = UNIT_AFTER.match(text, end), UNIT_AFTER.match(text, later_end)
    if first is None or second is None or not text[end - 1:end].isdigit():
        return False
    return first[1].lower().rstrip("s") != second[1].lower().rstrip("s") \
        and not _CORRECTION.match(text, first.start(1))
