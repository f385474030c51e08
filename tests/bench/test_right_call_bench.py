"""`stackroute bench right-call` (issue 25): the query selection and summary arithmetic
(tier a), and the smoke run through the CLI with the real embedded model (tier c)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from stackroute.bench.experiments.right_call import (
    SEAL_DIR,
    single_tool_queries,
    summarise,
)

ROOT = Path(__file__).resolve().parents[2]


def leaf_row(exact: bool, calls: int, wall_ms: float, matched: int) -> dict[str, Any]:
    return {"candidates": {"exact": exact, "model_calls": calls, "wall_ms": wall_ms,
                           "params": {"predicted": 2, "gold": 2, "matched": matched}}}


def test_the_summary_counts_exact_calls_params_calls_and_wall_time() -> None:
    rows = [leaf_row(True, 1, 100.0, 2), leaf_row(False, 3, 300.0, 1),
            leaf_row(True, 0, 200.0, 2)]
    summary = summarise(rows, "candidates")
    assert summary["queries"] == 3
    assert summary["exact"] == pytest.approx(2 / 3, abs=1e-4)
    assert summary["param_precision"] == summary["param_recall"] == pytest.approx(5 / 6,
                                                                                  abs=1e-4)
    assert summary["model_calls_p50"] == 1
    assert summary["model_calls_mean"] == pytest.approx(4 / 3, abs=0.01)
    assert summary["wall_ms_p50"] == 200.0
    assert summarise(rows, "routing") == {}


def test_the_routing_summary_reports_routing_beside_exact_calls() -> None:
    rows = [{"routing": {"exact": False, "routed": True, "model_calls": 4, "wall_ms": 1.0,
                         "params": {"predicted": 1, "gold": 1, "matched": 0}}},
            {"routing": {"exact": True, "routed": True, "model_calls": 2, "wall_ms": 2.0,
                         "params": {"predicted": 1, "gold": 1, "matched": 1}}}]
    summary = summarise(rows, "routing")
    assert (summary["routed"], summary["exact"], summary["model_calls_p50"]) == (1.0, 0.5, 3)


def test_only_single_tool_queries_with_gold_arguments_are_taken(tmp_path: Path) -> None:
    records = [{"id": "a", "query": "q", "gold": ["x/y"], "args": [{"k": 1}]},
               {"id": "b", "query": "q", "gold": ["x/y", "x/z"], "args": [{}, {}]},
               {"id": "c", "query": "q", "gold": ["x/y"], "args": [{}]},
               {"id": "d", "query": "q", "gold": ["x/z"], "args": [{"k": 2}]}]
    path = tmp_path / "q.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    # "c" has a gold arguments object, empty: the right call invents none
    assert [r["id"] for r in single_tool_queries(path, offset=0, limit=5)] == ["a", "c", "d"]
    assert [r["id"] for r in single_tool_queries(path, offset=2, limit=5)] == ["d"]


@pytest.mark.model
@pytest.mark.skipif(not (SEAL_DIR / "dev.queries.jsonl").is_file(),
                    reason="the Seal-Tools data (shared/data/seal-tools) is not here")
def test_smoke_makes_two_dev_calls_at_the_gold_leaf(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "stackroute.server.cli", "bench", "right-call",
                           "--smoke", "--out", str(tmp_path)], capture_output=True, text=True,
                          cwd=ROOT, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    [written] = tmp_path.glob("right-call-dev.queries-*.json")
    body = json.loads(written.read_text())
    assert body["num_queries"] == 2
    # the machine as it is (this field once claimed "4 other helpers busy beside it" on
    # every run), and the commit that ran
    assert body["machine"] == f"{platform.machine()}, {os.cpu_count()} cores"
    assert body["commit"] == subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True,
                                            text=True, cwd=ROOT).stdout.strip()
    assert [r["id"] for r in body["results"]] == ["dev-easy-0", "dev-easy-1"]
    assert body["optional_values"] == "meaning"  # the product's, recorded with the run
    summary = body["summary"]["candidates"]
    assert summary["queries"] == 2 and 0.0 <= summary["exact"] <= 1.0
    for row in body["results"]:
        assert set(row["candidates"]) >= {"arguments", "model_calls", "exact", "params"}
        assert row["gold"]  # gold arguments, compared after schema coercion


def test_a_routing_row_counts_the_decisions_the_evidence_recalled() -> None:
    from doubles import LogitEngine, then_done
    from recovery_kit import evidence_source, house_tree
    from stackroute.bench.experiments.right_call import routing_row
    from stackroute.server.routing.options import DraftSource, RouterOptions
    from stackroute.server.routing.recovery import RecoveryOptions
    from stackroute.server.routing.router import build_machine
    from stackroute.server.tools.evaluate import Query

    tree = house_tree()
    engine = LogitEngine(then_done({"transfers": 40.0, "weather": 30.0, "split_rent": 1.0}))
    options = RouterOptions(recovery=RecoveryOptions(
        evidence_weight=0.0, is_fallback_enabled=False, recall_after_backs=1),
        speculation=DraftSource.OFF)
    machine = build_machine(tree, engine, options=options, evidence=evidence_source(tree))
    query = Query(id="q", query="Pay the water bill now", gold=("billing/pay_water",),
                  args=None, tags=())
    row = routing_row(machine, tree, query)["routing"]
    assert row["called"] == ["billing/pay_water"] and row["routed"]
    assert row["recalls"] == 1
