"""bench/experiments/request_latency.py: the parts that need no model (checkout namespaces,
suite files, the summary); the side-by-side run itself is a benchmark
(bench/results/*-request-latency)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from stackroute.bench.experiments.request_latency import (
    PACKAGES,
    namespace_for,
    percentile,
    run_paired,
    start_worker,
    suite_files,
    summarise,
)


def test_a_checkout_is_imported_through_its_own_namespace(tmp_path: Path) -> None:
    checkout = tmp_path / "old"
    for package in PACKAGES:
        (checkout / package).mkdir(parents=True)
        (checkout / package / "__init__.py").write_text(f"WHERE = {package!r} + ' in old'\n")
    root = namespace_for(checkout, tmp_path / "ns")
    assert root is not None
    code = "import stackroute.runtime as r; print(r.WHERE, r.__file__)"
    out = subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": str(root)},
                         capture_output=True, text=True, cwd=tmp_path, check=True).stdout
    assert out.startswith("runtime in old ")  # the symlinked package, not the installed one
    assert namespace_for(Path("."), tmp_path / "unused") is None


def test_a_folder_that_is_no_checkout_is_refused(tmp_path: Path) -> None:
    (tmp_path / "runtime").mkdir()
    with pytest.raises(SystemExit, match="missing grammars, server, bench"):
        namespace_for(tmp_path, tmp_path / "ns")


def test_a_suite_folder_needs_one_tree_catalog_and_its_queries(tmp_path: Path) -> None:
    (tmp_path / "s.flat.catalog.json").write_text("{}")
    with pytest.raises(SystemExit, match="found 0 and 0"):
        suite_files(tmp_path)
    (tmp_path / "s.catalog.json").write_text("{}")
    (tmp_path / "s.queries.jsonl").write_text("")
    assert suite_files(tmp_path) == (tmp_path / "s.catalog.json", tmp_path / "s.queries.jsonl")


def test_the_summary_reads_the_rows() -> None:
    rows = [{"wall_ms": ms, "model_calls": 2, "forward_passes": 5, "generated_tokens": 9}
            for ms in (100.0, 300.0, 200.0, 1000.0)]
    summary = summarise(rows)
    assert summary["wall_ms_p50"] == 250.0 and summary["wall_ms_p95"] == 1000.0
    assert summary["model_calls_mean"] == 2 and summary["queries"] == 4
    assert percentile([3.0, 1.0, 2.0], 0.0) == 1.0


ITEM_SCRIPT = r"""
import json, os, sys
report = os.fdopen(int(os.environ["STACKROUTE_BENCH_REPORT_FD"]), "w", buffering=1)
for item in sys.argv[1:]:
    report.write(json.dumps({"ready": item, "text": "t"}) + "\n")
    if sys.stdin.readline().strip() != "go":
        raise SystemExit(0)
    report.write(json.dumps({"id": item, "wall_ms": 1.0, "model_calls": 1,
                             "forward_passes": 1, "generated_tokens": 0,
                             "called": []}) + "\n")
"""


def test_paired_workers_run_the_same_items_in_step() -> None:
    workers = [start_worker(name, None, ITEM_SCRIPT, ["a", "b"]) for name in ("x", "y")]
    run_paired("t", workers)
    assert [[r["id"] for r in w.rows] for w in workers] == [["a", "b"], ["a", "b"]]
    for w in workers:
        w.finish()


def test_workers_on_different_items_are_not_paired() -> None:
    workers = [start_worker("x", None, ITEM_SCRIPT, ["a", "b"]),
               start_worker("y", None, ITEM_SCRIPT, ["a", "c"])]
    with pytest.raises(SystemExit, match="not on the same item"):
        run_paired("t", workers)
    for w in workers:
        w.process.kill()


FED_SCRIPT = r"""
import json, os, sys
report = os.fdopen(int(os.environ["STACKROUTE_BENCH_REPORT_FD"]), "w", buffering=1)
for line in sys.stdin:
    job = json.loads(line)
    report.write(json.dumps({"ready": job["ready"], "text": job["text"]}) + "\n")
    if sys.stdin.readline().strip() != "go":
        raise SystemExit("stopped")
    report.write(json.dumps({"id": job["ready"], "wall_ms": 2.0, "model_calls": 1,
                             "forward_passes": 1, "generated_tokens": 0,
                             "called": [job["text"]]}) + "\n")
"""


def test_a_fed_worker_runs_each_item_the_others_run() -> None:
    workers = [start_worker(name, None, ITEM_SCRIPT, ["a", "b"]) for name in ("x", "y")]
    fed = start_worker("free", None, FED_SCRIPT, [])
    run_paired("t", workers, [fed])
    for w in [*workers, fed]:
        w.finish()
    assert [r["id"] for r in fed.rows] == ["a", "b"]
    assert [r["called"] for r in fed.rows] == [["t"], ["t"]]  # it got each item's text
