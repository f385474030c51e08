"""`stackroute lint`: validation problems, tree statistics and structural warnings."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stackroute.runtime.catalog import load_catalog
from stackroute.runtime.errors import CatalogError, Problem
from stackroute.runtime.tree import CapabilityTree, TreeStats

WIDE_MENU = 40  # options a small model can still read in one routing call
MAX_USEFUL_DEPTH = 6


@dataclass
class LintReport:
    source: str
    stats: TreeStats | None = None
    errors: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)

    @property
    def is_ok(self) -> bool:
        return not self.errors

    def to_dict(self) -> dict[str, Any]:
        s = self.stats
        return {
            "source": self.source,
            "num_leaves": s.num_leaves if s else 0,
            "num_routers": s.num_routers if s else 0,
            "depth": s.depth if s else 0,
            "max_menu": s.max_menu if s else 0,
            "stats": s.to_dict() if s else None,
            "errors": [{"path": p.path, "message": p.message} for p in self.errors],
            "warnings": [{"path": p.path, "message": p.message} for p in self.warnings],
        }


def lint_file(path: str | Path) -> LintReport:
    report = LintReport(source=str(path))
    try:
        tree = load_catalog(path)
    except CatalogError as e:
        report.errors = e.problems
        return report
    report.stats = tree.stats()
    report.warnings = structural_warnings(tree)
    return report


def structural_warnings(tree: CapabilityTree) -> list[Problem]:
    out = []
    for node in tree.nodes():
        if node.depth > 0 and not node.description.strip():
            out.append(Problem(node.path_str, "no description: the model routes by descriptions"))
        if node.is_leaf:
            continue
        n = len(node.children)
        if n > WIDE_MENU:
            out.append(Problem(node.path_str, f"menu of {n} options is wide (> {WIDE_MENU}); "
                                              "group the children under a few routers"))
        if n == 1 and node.depth > 0:
            out.append(Problem(node.path_str, f"single-child router (only "
                                              f"{node.children[0].name!r}): a routing call that "
                                              "decides nothing; merge it into its parent"))
    depth = tree.stats().depth
    if depth > MAX_USEFUL_DEPTH:
        out.append(Problem("", f"tree is {depth} levels deep: every level is a sequential "
                               "routing call"))
    return out
