"""Shortlisted menus: where the leaf evidence is sure, a frame opens with its best options only.

A menu's options are ranked by their evidence (each child's subtree score, aggregated as the
guided prior aggregates it). Where the evidence puts the first `k` options (`k` at most
`max_options`) above the rest by at least `margin` (cosine units, between the k-th and the
(k+1)-th), the frame's opening turn shows those `k` options with their descriptions and one
`OTHER` option; `OTHER` appends the full menu to the same frame (`runtime/machine.py`), so the
prompt stays append-only. Where no such gap exists, the full menu. Menus that would hide fewer
than `min_hidden` options, and frames above `min_depth`, are never shortlisted: with the
menu-first prompt order the root's menu is in the header every request shares (computed once
per catalog), so a shortlist there only adds tokens.

>>> options = ShortlistOptions(margin=0.05, max_options=2, min_hidden=2)
>>> decide({"a": 0.71, "b": 0.52, "c": 0.50, "d": 0.1}, options)
Shortlist(children=('a',), margin=0.19)
>>> decide({"a": 0.71, "b": 0.70, "c": 0.69, "d": 0.68}, options) is None
True
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stackroute.runtime.errors import InputError
from stackroute.runtime.menu import Menu, Shortlist
from stackroute.runtime.tree import Node

if TYPE_CHECKING:
    from stackroute.server.embeddings.leaf_index import Evidence
    from stackroute.server.routing.prior import PriorOptions


@dataclass(frozen=True, kw_only=True)
class ShortlistOptions:
    """When a menu is shortlisted, and how far (settings.py holds the product's values)."""

    margin: float = 0.08  # evidence gap between the last shown and the first hidden option
    max_options: int = 3  # options shown at most (besides OTHER and the completion states)
    min_hidden: int = 2  # hide at least this many options, or show the full menu
    min_depth: int = 1  # 0 also shortlists the root (menu-first, it is cached: no saving)

    def __post_init__(self) -> None:
        if not (self.margin >= 0 and math.isfinite(self.margin)):
            raise InputError(f"shortlist margin must be a number >= 0, got {self.margin}")
        if self.max_options < 1 or self.min_hidden < 1 or self.min_depth < 0:
            raise InputError("shortlist max_options and min_hidden must be >= 1 and "
                             f"min_depth >= 0, got {self.max_options}, {self.min_hidden}, "
                             f"{self.min_depth}")

    def describe(self) -> dict[str, float | int]:
        return {"margin": self.margin, "max_options": self.max_options,
                "min_hidden": self.min_hidden, "min_depth": self.min_depth}


def decide(scores: Mapping[str, float], options: ShortlistOptions) -> Shortlist | None:
    """The smallest top-`k` (`k <= max_options`) whose evidence is at least `margin` above
    every other option's and that hides at least `min_hidden` options; None: no such `k`
    (show the full menu). `scores`: each child's evidence (-inf: none, never shown first)."""
    ranked = sorted(scores.items(), key=lambda kv: -kv[1])
    for k in range(1, options.max_options + 1):
        if len(ranked) - k < options.min_hidden:
            return None
        last, first_hidden = ranked[k - 1][1], ranked[k][1]
        if not math.isfinite(last):
            return None
        gap = last - first_hidden
        if gap >= options.margin - 1e-9:  # inclusive, whatever the float rounding
            return Shortlist(children=tuple(name for name, _ in ranked[:k]),
                             margin=round(gap, 4) if math.isfinite(gap) else 1.0)
    return None


class EvidenceShortlister:
    """The runtime's `Shortlister` over a router's leaf evidence: each child's score is its
    subtree's under the guided prior's aggregate (the leaves the run called count as absent,
    as in the prior). `evidence_for(task, calls)`: the evidence of the ask the next call
    serves (`MenuScorer.evidence_for_task`)."""

    def __init__(self, evidence_for: Callable[[str, tuple[str, ...]], Evidence | None],
                 options: ShortlistOptions, prior: PriorOptions) -> None:
        self.evidence_for = evidence_for
        self.options = options
        self.prior = prior

    def shortlist(self, task: str, calls: tuple[str, ...], node: Node,
                  menu: Menu) -> Shortlist | None:
        if node.depth < self.options.min_depth or \
                len(menu.children) < 1 + self.options.min_hidden:
            return None
        evidence = self.evidence_for(task, calls)
        if evidence is None:
            return None
        remaining = evidence.without(calls)
        scores = {}
        for name in menu.children:
            child = node.child(name)
            if child is None:  # the menu holds this node's children only: our bug otherwise
                raise RuntimeError(f"menu option {name!r} is not a child of {node.path_str}")
            scores[name] = remaining.node_score(child.path_str, aggregate=self.prior.aggregate,
                                                temperature=self.prior.temperature)
        return decide(scores, self.options)
