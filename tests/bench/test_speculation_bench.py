"""The speculation benchmark's smoke run: every variant decides as step-by-step routing, and
a repeated request's cached route is accepted whole."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from stackroute.bench.experiments import speculation as speculation_bench


@pytest.mark.model
def test_smoke_run_is_identical_and_accepts_the_cached_route(
        tmp_path: Path, embedded_model_dir: Path, capsys: Any) -> None:
    argv = ["--smoke", "--out", str(tmp_path), "--model", str(embedded_model_dir)]
    assert speculation_bench.main(argv) == 0
    body = json.loads((tmp_path / "results.json").read_text())
    rows = body["results"]["scale-up-32"]["top"]
    assert set(rows) == set(speculation_bench.VARIANTS)
    for variant, row in rows.items():
        assert row["errors"] == 0, variant
        if variant != "steps-cache":
            assert row["identical"] == row["identity_checked"] == 1, variant
    routes = rows["spec-routes"]
    if rows["steps-cache"]["reached_leaf"]:  # the model chose a leaf: its route is cached
        assert routes["acceptance"] == 1.0
        assert routes["descent_passes_mean"] < rows["steps-cache"]["descent_passes_mean"]
    tasks = [json.loads(line) for line in (tmp_path / "tasks.jsonl").read_text().splitlines()]
    assert len(tasks) == len(speculation_bench.VARIANTS)
    assert all(t["is_identical"] for t in tasks if t["variant"] != "steps-cache")
    printed = capsys.readouterr().out
    assert "scale-up-32, from top" in printed
    # The table rebuilt from the recorded tasks is the one the run printed.
    assert speculation_bench.main(["--summarize", str(tmp_path / "tasks.jsonl")]) == 0
    assert capsys.readouterr().out == printed
