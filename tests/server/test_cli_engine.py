"""`run`, `route` and `eval` with the real embedded model, through the CLI (tier b)."""

from __future__ import annotations

import json
from pathlib import Path

from stackroute.server.cli import app
from typer.testing import CliRunner

REPO_ROOT = Path(__file__).resolve().parents[2]
BANK = REPO_ROOT / "examples" / "bank.catalog.json"
runner = CliRunner()


def test_run_json_follows_the_contract_with_speculation_counts(embedded_model_dir: Path) -> None:
    result = runner.invoke(app, ["run", str(BANK), "What is the balance of my savings account?",
                                 "--model", str(embedded_model_dir), "--json",
                                 "--speculation", "evidence"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["outcome"] in {"done", "paused", "limit", "error"}
    assert {"model_calls", "prompt_tokens", "prefill_tokens", "cached_tokens",
            "generated_tokens", "forward_passes", "speculated_levels", "accepted_levels",
            "latency_ms"} <= set(out["usage"])
    # The evidence drafts a path from the root, so the first routing call verified one.
    assert out["usage"]["speculated_levels"] >= 2
    assert out["usage"]["accepted_levels"] <= out["usage"]["speculated_levels"]


def test_run_no_speculation_routes_step_by_step(embedded_model_dir: Path) -> None:
    result = runner.invoke(app, ["run", str(BANK), "What is the balance of my savings account?",
                                 "--model", str(embedded_model_dir), "--json",
                                 "--speculation", "evidence", "--no-speculation"])
    assert result.exit_code == 0, result.output
    usage = json.loads(result.stdout.strip().splitlines()[-1])["usage"]
    assert usage["speculated_levels"] == usage["accepted_levels"] == 0


def test_an_unknown_speculation_mode_is_refused_before_the_model_loads() -> None:
    result = runner.invoke(app, ["run", str(BANK), "hi", "--speculation", "sometimes",
                                 "--model", "/nonexistent/model"])
    assert result.exit_code == 2
    assert "--speculation must be one of off, evidence, routes, both; got 'sometimes'" in \
        result.output
