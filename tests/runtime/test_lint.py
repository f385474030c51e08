"""`lint`: validation problems, statistics and structural warnings (tier a)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from machine_kit import BANK_CATALOG
from stackroute.runtime.catalog import build_tree
from stackroute.runtime.errors import Problem
from stackroute.runtime.lint import lint_file, structural_warnings

DESIGN_LINT_KEYS = {"num_leaves", "num_routers", "depth", "max_menu", "errors", "warnings"}


def write(tmp_path: Path, doc: Any, name: str = "c.catalog.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_lint_bank(tmp_path: Path) -> None:
    report = lint_file(write(tmp_path, BANK_CATALOG))
    assert report.is_ok and report.errors == []
    assert report.warnings == [Problem(
        "accounts/statements", "single-child router (only 'monthly'): a routing call that "
        "decides nothing; merge it into its parent")]
    d = report.to_dict()
    assert set(d) >= DESIGN_LINT_KEYS
    assert (d["num_leaves"], d["num_routers"], d["depth"], d["max_menu"]) == (5, 4, 3, 3)
    assert d["warnings"] == [{"path": "accounts/statements", "message": report.warnings[0].message}]


def test_lint_bad_catalog(tmp_path: Path) -> None:
    doc = {"name": "r", "children": [{"name": "pay", "children": [{"name": "send money"}]},
                                     {"name": "DONE"}]}
    report = lint_file(write(tmp_path, doc))
    assert not report.is_ok and report.stats is None
    d = report.to_dict()
    assert (d["num_leaves"], d["num_routers"], d["depth"], d["max_menu"], d["stats"]) == (
        0, 0, 0, 0, None)
    assert [e["path"] for e in d["errors"]] == ["pay/send money", "DONE"]


def test_structural_warnings() -> None:
    deep: dict[str, Any] = {"name": "leaf", "description": "x"}
    for i in range(7, 0, -1):
        deep = {"name": f"d{i}", "description": "x", "children": [deep, {"name": f"o{i}",
                                                                          "description": "x"}]}
    wide = {"name": "wide", "description": "x",
            "children": [{"name": f"t{i}", "description": "x"} for i in range(41)]}
    tree = build_tree({"name": "r", "description": "", "children": [
        {"name": "nodesc", "description": "  "}, wide, deep]})
    assert sorted((p.path, p.message.split(":")[0]) for p in structural_warnings(tree)) == [
        ("", "tree is 8 levels deep"),
        ("nodesc", "no description"),
        ("wide", "menu of 41 options is wide (> 40); group the children under a few routers"),
    ]


def test_lint_seal_tools_is_fast_and_clean(seal_tools_path: Path) -> None:
    started = time.perf_counter()
    report = lint_file(seal_tools_path)
    elapsed_s = time.perf_counter() - started
    assert report.is_ok
    d = report.to_dict()
    assert (d["num_leaves"], d["num_routers"], d["depth"], d["max_menu"]) == (4076, 2423, 3, 146)
    assert report.warnings[0] == Problem(
        "", "menu of 146 options is wide (> 40); group the children under a few routers")
    assert elapsed_s < 5.0
