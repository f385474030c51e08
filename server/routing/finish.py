"""When the work is done: end a run after its calls without asking the model again.

A small model that has just called the right leaf often goes on (SmolLM2-135M called an
unrelated second leaf after the right one), and every `DONE` on the way back up is a model call.
Here the request is split into its parts (sentences, and clauses joined by "then",
"additionally", …) and each part is matched to its best leaf by the evidence. A part *asks
for* a capability when that score reaches `min_part_score`. The run is finished, and every
frame answers `DONE` with no model call, when
- at most one part asks for anything, and the run made a call; or
- the run made at least as many calls as parts ask, or every asking part's best leaf has
  been called.
Otherwise the model decides, under the evidence prior, whether a second capability is due.

Distractor sentences that merely mention a capability ("my brother complained about his gift
card") score lower than real asks on the dev splits (median 0.45 vs 0.69 on noisy-two-step,
all-MiniLM-L6-v2), but the ranges overlap; `min_part_score` sits at the asks' lowest decile.

>>> request_parts("First, export the mortgages as csv. Then cancel mortgage MOR-1 for good.")
['export the mortgages as csv.', 'cancel mortgage MOR-1 for good.']
>>> request_parts("Send 500 dollars to Asha")
['Send 500 dollars to Asha']
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from stackroute.server.embeddings.leaf_index import EvidenceSource
from stackroute.server.routing.lru import Lru

# Sentence ends, and the connectives that start another step of a multi-step request.
_PART_BREAK = re.compile(
    r"(?<=[.!?;])\s+"
    r"|,?\s+\b(?:and then|then|after that|afterwards|when that is done|additionally|finally|"
    r"also|next)\b,?\s*", re.IGNORECASE)
_LEADING = re.compile(r"^(?:(?:and|then|after that|afterwards|additionally|finally|also|next|"
                      r"first|second)\b,?\s*)+", re.IGNORECASE)
MIN_PART_WORDS = 3  # "Thanks." and "Two things:" ask for nothing


def request_parts(task: str) -> list[str]:
    """The request's parts, in order; a request with no break is one part."""
    parts = [_LEADING.sub("", p.strip()) for p in _PART_BREAK.split(task) if p and p.strip()]
    long = [p for p in parts if len(p.split()) >= MIN_PART_WORDS]
    return long or [task.strip()]


@dataclass(frozen=True)
class Finish:
    """The verdict, and why (recorded in the decision's detail)."""

    is_done: bool
    detail: dict[str, Any]


class FinishCheck:
    """Decides from the evidence alone whether a run with calls is finished."""

    def __init__(self, evidence: EvidenceSource, *, min_part_score: float,
                 max_tasks: int = 256) -> None:
        self.evidence = evidence
        self.min_part_score = min_part_score
        index = evidence.index
        self._report_path = dict(zip(index.paths, index.report_paths, strict=True))
        self._asks: Lru[str, list[tuple[str, str]]] = Lru(max_entries=max_tasks)

    def asks(self, task: str) -> list[tuple[str, str]]:
        """The parts of `task` that ask for a capability, in order, with their best leaf.
        Memoised by task: a run asks at every decision, and each part's evidence scores
        every leaf of the catalog."""
        known = self._asks.get(task)
        if known is not None:
            return known
        out = []
        for part in request_parts(task):
            leaf, score = self.evidence.for_request(part).best()
            if score >= self.min_part_score:
                out.append((part, self._report_path[leaf]))
        self._asks.put(task, out)
        return out

    def current_part(self, task: str, calls: tuple[str, ...]) -> str | None:
        """In a request of several asks, the one the next call serves (the k-th call serves
        the k-th ask, so the calls follow the request's order); None for a request of one."""
        asks = self.asks(task)
        if len(asks) < 2 or len(calls) >= len(asks):
            return None
        return asks[len(calls)][0]

    def check(self, task: str, calls: tuple[str, ...]) -> Finish:
        if not calls:
            return Finish(False, {})
        asks = [leaf for _, leaf in self.asks(task)]
        called = set(calls)
        missing = [leaf for leaf in dict.fromkeys(asks) if leaf not in called]
        is_done = len(asks) <= 1 or len(calls) >= len(asks) or not missing
        return Finish(is_done, {"asks": len(asks), "calls": len(calls),
                                "missing": missing[:3]})
