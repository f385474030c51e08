"""`stackroute bench mcp --smoke`: three Seal-Tools fields as MCP server processes, the gateway
as a process, one query; the token table is written and the gateway's views are smaller than
the servers' full tools/list (tier c: the gateway routes with the embedded model)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp_kit import ENV, REPO_ROOT

pytestmark = [pytest.mark.model, pytest.mark.slow]


def test_bench_mcp_smoke_writes_the_token_table(shared_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "bench"
    done = subprocess.run(
        [sys.executable, "-m", "stackroute.bench.cli", "mcp", "--smoke", "--limit", "1",
         "--max-wait-s", "60", "--out", str(out), "--data", str(shared_data)],
        env={**ENV, "PATH": os.environ.get("PATH", "")}, cwd=REPO_ROOT, capture_output=True,
        text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    table = summary["table"]
    assert summary["num_queries"] == 1 and summary["fields"] == ["Law", "Finance", "Education"]
    assert table["direct"]["tokens_mean"] > 5 * table["route"]["tokens_mean"] > 0
    assert table["direct"]["tokens_mean"] > table["discover"]["tokens_mean"] > 0
    assert table["discover"]["success"] == 1  # the oracle walker reaches the gold tool
    [item] = [json.loads(line) for line in (out / "items.jsonl").read_text().splitlines()]
    assert item["route"]["status"] in ("done", "running", "error", "limit")
    assert (out / "command.txt").read_text().startswith("stackroute bench mcp")
