"""`run`, `route` and `eval` with the real embedded model, through the CLI (tier b)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from stackroute.server.cli import app
from typer.testing import CliRunner

REPO_ROOT = Path(__file__).resolve().parents[3]
BANK = REPO_ROOT / "examples" / "bank.catalog.json"
runner = CliRunner()


@pytest.mark.model
def test_run_json_follows_the_contract_with_speculation_counts(embedded_model_dir: Path) -> None:
    result = runner.invoke(app, ["run", str(BANK), "What is the balance of my savings account?",
                                 "--model", str(embedded_model_dir), "--json",
                                 "--policy", "plain", "--speculation", "evidence"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["outcome"] in {"done", "paused", "limit", "error"}
    assert {"model_calls", "prompt_tokens", "prefill_tokens", "cached_tokens",
            "generated_tokens", "forward_passes", "speculated_levels", "accepted_levels",
            "latency_ms"} <= set(out["usage"])
    # The evidence drafts a path from the root, so the first routing call verified one.
    assert out["usage"]["speculated_levels"] >= 2
    assert out["usage"]["accepted_levels"] <= out["usage"]["speculated_levels"]


@pytest.mark.model
def test_run_no_speculation_routes_step_by_step(embedded_model_dir: Path) -> None:
    result = runner.invoke(app, ["run", str(BANK), "What is the balance of my savings account?",
                                 "--model", str(embedded_model_dir), "--json",
                                 "--policy", "plain", "--speculation", "evidence",
                                 "--no-speculation"])
    assert result.exit_code == 0, result.output
    usage = json.loads(result.stdout.strip().splitlines()[-1])["usage"]
    assert usage["speculated_levels"] == usage["accepted_levels"] == 0


@pytest.mark.model
def test_the_readme_command_sends_the_money_once(embedded_model_dir: Path) -> None:
    """The README's main command, with the default policy: guided, for the embedded model."""
    result = runner.invoke(app, ["run", str(BANK), "Send 500 dollars to Asha", "--auto-approve",
                                 "--model", str(embedded_model_dir), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["outcome"] == "done"
    assert out["calls"] == [{"path": "payments/send_money",
                             "arguments": {"payee": "Asha", "amount": 500}}]
    assert out["routing"]["policy"] == "guided"
    assert out["usage"]["model_calls"] <= 6


@pytest.mark.model
def test_route_json_records_the_policy(embedded_model_dir: Path) -> None:
    result = runner.invoke(app, ["route", str(BANK), "Send 500 dollars to Asha",
                                 "--model", str(embedded_model_dir), "--json",
                                 "--policy", "plain"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout.strip().splitlines()[-1])
    # `route` goes through the same route call as /v1/route, so it reports the product's
    # speculation default (routes), as /v1/route does (it re-implemented routing with it off)
    assert out["routing"] == {"policy": "plain", "calibration": None, "speculation": "routes",
                              "unwinding": "off"}
    assert set(out["probabilities"]) == {"payments", "accounts", "cards", "DONE"}


def test_an_unknown_policy_is_refused_before_the_model_loads() -> None:
    result = runner.invoke(app, ["route", str(BANK), "x", "--model", "/nonexistent/model",
                                 "--policy", "clever"])
    assert result.exit_code == 2
    assert "--policy must be one of plain, guided; got 'clever'" in result.output


def test_an_unknown_speculation_mode_is_refused_before_the_model_loads() -> None:
    result = runner.invoke(app, ["run", str(BANK), "hi", "--speculation", "sometimes",
                                 "--model", "/nonexistent/model"])
    assert result.exit_code == 2
    assert "--speculation must be one of off, evidence, routes, both; got 'sometimes'" in \
        result.output
