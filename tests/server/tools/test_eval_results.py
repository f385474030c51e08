"""`eval --json` lists every query's result beside the aggregates (DESIGN.md's contract): the
called paths, their arguments, success, argument success, usage, wall time, and Seal-Tools'
parameter precision / recall / F1. The keyword engine of console_kit stands in for the model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from console_kit import BANK
from stackroute.runtime.catalog import build_tree
from stackroute.server.cli import app
from stackroute.server.tools.evaluate import EvalSummary, ParamCounts, Query, param_counts
from typer.testing import CliRunner

ENGINE = ["--engine", "console_kit:build_keyword_engine"]
RESULT_KEYS = {"id", "query", "tags", "gold", "gold_args", "called", "arguments", "success",
               "args_success", "outcome", "usage", "format_failures", "wall_ms", "params",
               "error", "written_values", "asked_values", "abstention"}


@pytest.fixture()
def files(tmp_path: Path) -> tuple[Path, Path]:
    bank = tmp_path / "bank.json"
    bank.write_text(json.dumps(BANK), encoding="utf-8")
    queries = tmp_path / "queries.jsonl"
    queries.write_text("\n".join(json.dumps(q) for q in [
        {"id": "a", "query": "how many funds do I have", "gold": ["payments/balance"]},
        {"id": "b", "query": "do I need an umbrella in Lisbon", "gold": ["weather"],
         "args": [{"city": "Lisbon"}]},
    ]) + "\n", encoding="utf-8")
    return bank, queries


def test_eval_json_lists_each_query_beside_the_aggregates(files: tuple[Path, Path]) -> None:
    bank, queries = files
    result = CliRunner().invoke(app, ["eval", str(bank), str(queries), "--json", *ENGINE])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["num_queries"] == 2
    assert [r["id"] for r in out["results"]] == ["a", "b"]
    for row in out["results"]:
        assert set(row) == RESULT_KEYS
        assert row["wall_ms"] > 0
        assert len(row["arguments"]) == len(row["called"])
        assert row["success"] == (row["called"] == row["gold"])
    assert out["results"][1]["gold_args"] == [{"city": "Lisbon"}]
    assert out["success"] == sum(r["success"] for r in out["results"]) / 2
    assert out["wall_ms_p95"] >= out["wall_ms_p50"] > 0
    assert {"param_precision", "param_recall", "param_f1"} <= set(out)


@pytest.mark.parametrize("missing_values", ["write", "ask"])
def test_eval_json_names_the_values_written_or_asked(tmp_path: Path,
                                                     missing_values: str) -> None:
    bank = tmp_path / "bank.json"
    bank.write_text(json.dumps(BANK), encoding="utf-8")
    queries = tmp_path / "queries.jsonl"
    queries.write_text("\n".join(json.dumps(q) for q in [
        {"id": "given", "query": "send 5 euros to Asha", "gold": ["payments/send_money"]},
        {"id": "missing", "query": "send money to Asha", "gold": ["payments/send_money"]},
    ]) + "\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["eval", str(bank), str(queries), "--json", *ENGINE,
                                      "--missing-values", missing_values])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    if missing_values == "write":
        assert [r["written_values"] for r in out["results"]] == [[[]], [["amount"]]]
        assert (out["calls_with_written_values"], out["queries_that_asked"]) == (1, 0)
        return
    # asked: the run stops at the call, counted as the leaf it chose without the amount
    missing = out["results"][1]
    assert (missing["asked_values"], missing["outcome"]) == (["amount"], "paused")
    assert missing["called"] == ["payments/send_money"] and missing["success"]
    assert missing["arguments"] == [{"payee": "Asha"}]
    assert (out["calls_with_written_values"], out["queries_that_asked"]) == (0, 1)


def test_eval_json_records_the_out_of_scope_check_per_query(tmp_path: Path) -> None:
    """With `--abstain`, each query's record carries the check's verdict (its leaf, fit,
    threshold and features) where the run reached one: what refitting the check, or reading
    why a clear request got no call, needs. The real embedded model on the bank example."""
    queries = tmp_path / "queries.jsonl"
    queries.write_text("\n".join(json.dumps(q) for q in [
        {"id": "in", "query": "Send 500 dollars to Asha", "gold": ["payments/send_money"]},
        {"id": "out", "query": "Hi there! How are you doing today?", "gold": []},
    ]) + "\n", encoding="utf-8")
    bank = Path(__file__).resolve().parents[3] / "examples" / "bank.catalog.json"
    result = CliRunner().invoke(app, ["eval", str(bank), str(queries), "--json", "--abstain"])
    assert result.exit_code == 0, result.output
    served, chat = json.loads(result.stdout)["results"]
    assert served["called"] == ["payments/send_money"], served
    [verdict] = served["abstention"]
    assert verdict["leaf"] == "payments/send_money" and not verdict["abstain"]
    assert verdict["fit"] >= verdict["threshold"]
    assert set(verdict["features"]) == {"judge", "contrast", "score", "margin", "values",
                                        "lead", "named"}
    assert chat["called"] == []
    assert all(v["abstain"] for v in chat["abstention"]), chat  # stopped there, or before


def test_eval_json_has_no_verdict_without_the_check(files: tuple[Path, Path]) -> None:
    bank, queries = files
    result = CliRunner().invoke(app, ["eval", str(bank), str(queries), "--json", *ENGINE])
    assert result.exit_code == 0, result.output
    assert [r["abstention"] for r in json.loads(result.stdout)["results"]] == [[], []]


def test_eval_table_leaves_the_per_query_rows_to_json(files: tuple[Path, Path]) -> None:
    bank, queries = files
    result = CliRunner().invoke(app, ["eval", str(bank), str(queries), *ENGINE])
    assert result.exit_code == 0, result.output
    assert "success" in result.stdout and "wall_ms_p50" in result.stdout
    assert "results" not in result.stdout


def test_parameter_counts_compare_values_after_schema_coercion() -> None:
    tree = build_tree({"name": "r", "children": [{"name": "pay", "description": "Pay.",
        "parameters": {"type": "object", "properties": {
            "amount": {"type": "number"}, "payee": {"type": "string"},
            "note": {"type": "string"}}}}]})
    query = Query(id="q", query="pay Asha 500", gold=("pay",),
                  args=({"amount": "500", "payee": "Asha"},), tags=())
    counts = param_counts(tree, query, ("pay",), ({"amount": 500, "payee": "asha ",
                                                   "note": "x"},))
    assert counts == ParamCounts(predicted=3, gold=2, matched=2)
    assert counts.prf() == pytest.approx({"param_precision": 2 / 3, "param_recall": 1.0,
                                          "param_f1": 0.8})
    wrong_leaf = param_counts(tree, query, (), ())
    assert wrong_leaf == ParamCounts(predicted=0, gold=2, matched=0)
    assert param_counts(tree, Query(id="n", query="x", gold=("pay",), args=None, tags=()),
                        ("pay",), ({"amount": 1},)) == ParamCounts()


def test_an_empty_summary_has_zero_rates_and_no_rows() -> None:
    out = EvalSummary().to_dict()
    assert out["results"] == [] and out["wall_ms_p95"] == 0.0 and out["param_f1"] == 0.0
