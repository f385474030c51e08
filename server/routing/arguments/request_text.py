"""A request read once for its values: its words, the start of each sentence, and the dates,
times, numbers, quotes and literals it holds. Every property of a leaf draws its candidates
from the same reading (`candidates.py`), so a leaf of many properties parses its request once.
Every number is found, a date's and a time's pieces too: a property's candidates leave out
those inside `when`.

>>> text = RequestText.read("Book 2 seats on 7 Jan 2026 at 9am. Call it 'Trip'.")
>>> [t.word for t in text.tokens][:4], [text.tokens[k].word for k in sorted(text.starts)]
(['Book', '2', 'seats', 'on'], ['Book', 'Call'])
>>> [d.iso for d in text.dates], [t.iso for t in text.times], [n.value for n in text.numbers]
(['2026-01-07'], ['09:00'], [2, 7, 2026, 9])
>>> [text.text[a:b] for a, b in text.quotes], text.same_clause(0, 3), text.same_clause(3, 9)
(["'Trip'"], True, False)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

from stackroute.server.routing.arguments.cues import QUOTED
from stackroute.server.routing.arguments.dates import FoundDate, FoundTime, find_dates, find_times
from stackroute.server.routing.arguments.literals import Literal, find_literals
from stackroute.server.routing.arguments.numbers import FoundNumber, find_numbers

_WORD = re.compile(r"[\w$€£@#][\w.@/+'’#-]*[\w%]|[\w$€£%]")
_CLAUSE_MARK = re.compile(r"[.,;:!?()\[\]\"“”]")  # between two words: another clause
_SENTENCE_MARK = re.compile(r"[.!?\n]")
# A title's period before a name ends neither a sentence nor a clause ("Dr. Nguyen")
_TITLE = re.compile(r"\b(?:Dr|Mr|Mrs|Ms|Mx|Prof)\.(?=\s+[A-Z])")


class Token(NamedTuple):
    word: str  # as written, closing punctuation left out
    start: int  # where in the request

    @property
    def end(self) -> int:
        return self.start + len(self.word)


@dataclass(frozen=True)
class RequestText:
    text: str
    marks: str  # `text` with the periods of titles blanked: where clauses and sentences end
    tokens: tuple[Token, ...]
    starts: frozenset[int]  # the tokens that open a sentence or a line (their verb, often)
    titles: frozenset[int]  # the tokens that are a title before a name ("Dr" of "Dr. Nguyen")
    dates: tuple[FoundDate, ...]
    times: tuple[FoundTime, ...]
    numbers: tuple[FoundNumber, ...]
    literals: tuple[Literal, ...]
    quoted: tuple[re.Match[str], ...]

    @classmethod
    def read(cls, text: str) -> RequestText:
        found = [Token(m[0].rstrip(".,;:!?'\"’"), m.start()) for m in _WORD.finditer(text)]
        tokens = tuple(t for t in found if t.word)
        marks = _TITLE.sub(lambda m: m[0][:-1] + " ", text)
        starts = frozenset(k for k, token in enumerate(tokens) if k == 0 or _SENTENCE_MARK.search(
            marks[tokens[k - 1].end:token.start]))
        titles = frozenset(k for k, token in enumerate(tokens)
                           if _TITLE.match(text, token.start))
        return cls(text, marks, tokens, starts, titles, tuple(find_dates(text)),
                   tuple(find_times(text)), tuple(find_numbers(text)),
                   tuple(find_literals(text)), tuple(QUOTED.finditer(text)))

    @cached_property
    def when(self) -> tuple[tuple[int, int], ...]:
        """Where the request writes a date or a time."""
        return tuple(d.span for d in self.dates) + tuple(t.span for t in self.times)

    def overlaps_when(self, span: tuple[int, int] | None) -> bool:
        """Whether `span` overlaps a date or a clock time of the request ("10 2026" of
        "dec 10 2026")."""
        return span is not None and any(a < span[1] and span[0] < b for a, b in self.when)

    @cached_property
    def quotes(self) -> tuple[tuple[int, int], ...]:
        return tuple(m.span() for m in self.quoted)

    def same_clause(self, i: int, j: int) -> bool:
        """Whether tokens `i` < `j` stand in one clause: no clause mark between them."""
        return not _CLAUSE_MARK.search(self.marks[self.tokens[i].end:self.tokens[j].start])
