"""Where guided routing did not call what its own evidence alone calls (issue 25 item 4):
per query, the evidence's call, the router's, the gold, and who was right.

>>> rows = overturned([("q1", ("a",), ("b",), ("b",)), ("q2", ("a",), ("a",), ("a",)),
...                    ("q3", ("a",), ("c",), ("a",))])
>>> (rows.num_overturned, rows.num_right, rows.num_wrong)
(2, 1, 1)
>>> rows.to_dict()["decisions"][0]["router_right"]
True
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

Paths = tuple[str, ...]


@dataclass(frozen=True)
class Overturned:
    query_id: str
    evidence: Paths  # what the evidence alone calls (() below its out-of-scope score)
    router: Paths
    gold: Paths

    @property
    def is_router_right(self) -> bool:
        return self.router == self.gold

    @property
    def is_evidence_right(self) -> bool:
        return self.evidence == self.gold


@dataclass(frozen=True)
class OverturnedDecisions:
    decisions: tuple[Overturned, ...]
    num_queries: int

    @property
    def num_overturned(self) -> int:
        return len(self.decisions)

    @property
    def num_right(self) -> int:
        """Overturned and the router right where the evidence was wrong."""
        return sum(d.is_router_right and not d.is_evidence_right for d in self.decisions)

    @property
    def num_wrong(self) -> int:
        """Overturned and the evidence right where the router was wrong."""
        return sum(d.is_evidence_right and not d.is_router_right for d in self.decisions)

    def to_dict(self) -> dict[str, Any]:
        return {"num_queries": self.num_queries, "overturned": self.num_overturned,
                "right": self.num_right, "wrong": self.num_wrong,
                "decisions": [{"id": d.query_id, "evidence": list(d.evidence),
                               "router": list(d.router), "gold": list(d.gold),
                               "router_right": d.is_router_right,
                               "evidence_right": d.is_evidence_right}
                              for d in self.decisions]}


def overturned(rows: Iterable[tuple[str, Paths, Paths, Paths]]) -> OverturnedDecisions:
    """`rows`: (query id, the evidence's call, the router's call, gold) per query."""
    rows = list(rows)
    return OverturnedDecisions(
        tuple(Overturned(q, tuple(e), tuple(r), tuple(g)) for q, e, r, g in rows
              if tuple(e) != tuple(r)), len(rows))
