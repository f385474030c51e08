"""Calibration (`server/tools/calibrate.py`, `stackroute calibrate`): the sweep and the
thresholds on hand-made numbers (tier a), collection with a scripted engine (tier b), and the
command with the embedded model (tier c)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from doubles import LogitEngine, WordEmbedder
from recovery_kit import evidence_source, house_tree
from stackroute.runtime.machine import StackMachine
from stackroute.runtime.prompt import PromptLayout, PromptStyle
from stackroute.runtime.router import ScriptedRouter
from stackroute.server.cli import app
from stackroute.server.embeddings.leaf_index import Evidence, LeafIndex
from stackroute.server.routing.calibration import read_calibration, router_options
from stackroute.server.routing.options import Policy
from stackroute.server.routing.recovery import RecoveryOptions
from stackroute.server.tools.calibrate import (
    backtrack_gap,
    best_done_gap,
    calibrate,
    chosen_row,
    measure_thresholds,
    separating_threshold,
    sweep,
    with_thresholds,
)
from stackroute.server.tools.calibration_records import (
    Dataset,
    MenuRecord,
    check_gold_paths,
    collect,
    gold_menus,
)
from stackroute.server.tools.evaluate import Query
from typer.testing import CliRunner

runner = CliRunner()
TREE = house_tree()
# leaf rows, depth first: pay_water, pay_power, split_rent, send_gift, wire_abroad, weather
INDEX = LeafIndex.from_tree(TREE, WordEmbedder(), model_id="words", lexical_weight=0.0)


def query(qid: str, text: str, *gold: str) -> Query:
    return Query(id=qid, query=text, gold=tuple(gold), args=None, tags=())


def root_record(qid: str, gold: str, raw: dict[str, float], scores: list[float]) -> MenuRecord:
    """The root menu (billing, transfers, weather, DONE) with the model's log-probs `raw`, a
    flat neutral prompt, and leaf scores `scores` in row order."""
    machine = StackMachine(TREE, ScriptedRouter([]), layout=PromptLayout(TREE, PromptStyle()))
    request, _ = next(gold_menus(machine, query(qid, "anything", "weather")))
    neutral = {o: math.log(0.25) for o in request.menu.options}
    return MenuRecord(dataset="dev", query_id=qid, node=request.node, menu=request.menu,
                      gold=gold, raw=raw, neutral=neutral,
                      evidence=Evidence(index=INDEX, scores=np.array(scores, dtype=np.float32)))


# -- the sweep ----------------------------------------------------------------------------------
def test_sweep_chooses_the_weakest_prior_that_fixes_the_model() -> None:
    # A: the model prefers billing by 1 nat; the evidence says weather (0.6 against 0.2).
    # The prior pushes billing down by weight * (0.6 - billing's score) / temperature:
    # max, T=0.05: 8w; softmax, T=0.02: billing = 0.2 + 0.02 ln 2, so 19.31w; softmax, T=0.05:
    # 7.31w. More than 1 nat first at w=0.1 with softmax T=0.02 (0.05 gives 0.97).
    a = root_record("a", "weather", {"billing": -0.5, "weather": -1.5, "transfers": -3.0,
                                     "DONE": -3.0}, [0.2, 0.2, 0.2, 0.2, 0.2, 0.6])
    # B: the model is right by 3 nats; the evidence leans the wrong way by 0.1 (max, T=0.05:
    # 2w nats, so w >= 1.5 breaks it).
    b = root_record("b", "transfers", {"billing": -3.5, "weather": -4.0, "transfers": -0.5,
                                       "DONE": -4.0}, [0.5, 0.5, 0.4, 0.4, 0.4, 0.1])
    rows = sweep([a, b])
    best = chosen_row(rows)
    assert {k: best[k] for k in ("evidence_weight", "evidence_aggregate",
                                 "evidence_temperature", "contrast_strength")} == {
        "evidence_weight": 0.1, "evidence_aggregate": "softmax", "evidence_temperature": 0.02,
        "contrast_strength": 0.0}
    assert best["path_accuracy_mean"] == 1.0

    def accuracy(weight: float, aggregate: str = "max") -> float:
        row = next(r for r in rows if r["evidence_weight"] == weight and r["contrast_strength"]
                   == 0 and r["evidence_aggregate"] == aggregate)
        return float(row["path_accuracy_mean"])

    assert accuracy(0.0) == 0.5  # the model alone misses A
    assert accuracy(0.2) == 1.0
    assert accuracy(1.5) == 0.5  # the prior overrules the model on B


def test_sweep_keeps_no_prior_when_the_model_is_right() -> None:
    right = root_record("a", "weather", {"billing": -2.0, "weather": -0.1, "transfers": -3.0,
                                         "DONE": -3.0}, [0.2, 0.2, 0.2, 0.2, 0.2, 0.6])
    best = chosen_row(sweep([right]))
    assert (best["evidence_weight"], best["contrast_strength"]) == (0.0, 0.0)


def test_a_tie_goes_to_the_row_that_asks_no_content_free_question() -> None:
    """Rows equally right: contrast off beats a weaker prior with contrast (each new menu's
    content-free call costs a model call a request); among those, the weakest prior."""
    rows = [{"path_accuracy_mean": 0.9, "evidence_weight": 0.75, "contrast_strength": 0.5},
            {"path_accuracy_mean": 0.9, "evidence_weight": 1.5, "contrast_strength": 0.0},
            {"path_accuracy_mean": 0.9, "evidence_weight": 1.0, "contrast_strength": 0.0},
            {"path_accuracy_mean": 0.8, "evidence_weight": 0.1, "contrast_strength": 0.0}]
    assert chosen_row(rows) is rows[2]
    assert chosen_row([*rows, {"path_accuracy_mean": 0.95, "evidence_weight": 0.5,
                               "contrast_strength": 1.0}])["path_accuracy_mean"] == 0.95


# -- thresholds ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("positive", "negative", "expected"), [
    ([0.5, 0.6, 0.7], [0.1, 0.2], 0.35),  # the middle of the gap
    # 0.5 and 0.6 both get four of five right: the lower one, every in-scope query kept
    ([0.5, 0.6, 0.7], [0.1, 0.55], 0.3),
    ([0.4, 0.5, 0.6], [], 0.39),  # no out-of-scope queries: under the lowest in-scope one
])
def test_separating_threshold(positive: list[float], negative: list[float],
                              expected: float) -> None:
    assert separating_threshold(positive, negative) == expected


@pytest.mark.parametrize(("gaps", "expected"), [
    ([round(0.01 * i, 2) for i in range(20)], 0.19),  # at most 5% of gold frames go BACK
    ([-0.3, -0.2], 0.0),  # never below zero
    ([], 0.15),
])
def test_backtrack_gap(gaps: list[float], expected: float) -> None:
    assert backtrack_gap(gaps) == expected


def test_best_done_gap_stops_after_the_last_call_and_goes_on_before() -> None:
    # (best called minus best remaining, should stop)
    cases = [(0.30, True), (0.20, True), (0.12, True), (0.08, False), (0.02, False)]
    assert best_done_gap(cases) == (0.08, 5)
    assert best_done_gap([(0.05, True), (0.1, False)]) == (0.0, 1)  # ties: the smallest gap


def test_thresholds_from_a_dev_set_with_multi_tool_queries() -> None:
    dev = Dataset("house", TREE, [
        query("1", "pay the water bill", "billing/pay_water"),
        query("2", "weather forecast for Oslo", "weather"),
        query("3", "knit a scarf"),
        query("4", "Pay the water bill. Then split the rent with my housemate.",
              "billing/pay_water", "transfers/split_rent"),
    ], PromptStyle())
    thresholds = measure_thresholds([dev], {"house": evidence_source(TREE)})
    assert thresholds["num_in_scope"] == 2 and thresholds["num_out_of_scope"] == 1
    # weather's 0.556 is the lowest in-scope best; the scarf matches nothing (0.0)
    assert thresholds["out_of_scope_score"] == 0.278
    # Cases: after pay_water in query 1 (pay_power still scores 0.48: stop), after pay_water
    # in query 4 (split_rent leads it: go on); the rest leave nothing above out of scope.
    assert thresholds["stop"] == {"done_gap": 0.0, "num_cases": 2, "stop_cases": 1,
                                  "accuracy": 1.0}
    assert thresholds["finish"]["num_asks"] == 2  # the multi-tool query's two sentences
    options = with_thresholds(RecoveryOptions(), thresholds)
    assert options.finish_part_score == thresholds["finish"]["finish_part_score"]
    assert options.fallback_min_score == options.out_of_scope_score


def test_missing_stop_and_finish_data_keep_the_base_options() -> None:
    base = RecoveryOptions(done_gap=0.07, finish_part_score=0.5)
    options = with_thresholds(base, {"out_of_scope_score": 0.2, "backtrack_gap": 0.1,
                                     "stop": {"num_cases": 0}, "finish": {"num_asks": 0}})
    assert (options.done_gap, options.finish_part_score) == (0.07, 0.5)


# -- collection and the whole calibration, with a scripted engine -------------------------------
def test_collect_asks_every_gold_path_menu_once_and_the_neutral_once_per_menu() -> None:
    engine = LogitEngine({"transfers": 1.0, "abroad": 1.0, "wire_abroad": 1.0})
    dev = Dataset("house", TREE, [query("1", "wire money abroad", "transfers/abroad/wire_abroad"),
                                  query("2", "wire more money abroad",
                                        "transfers/abroad/wire_abroad"),
                                  query("3", "knit a scarf")], PromptStyle())
    records = collect(engine, evidence_source(TREE), dev)
    assert [(r.query_id, r.node.path_str, r.gold) for r in records] == [
        ("1", "", "transfers"), ("1", "transfers", "abroad"),
        ("1", "transfers/abroad", "wire_abroad"),
        ("2", "", "transfers"), ("2", "transfers", "abroad"),
        ("2", "transfers/abroad", "wire_abroad"),
        ("3", "", "DONE")]
    assert len(engine.routing_calls()) == 7
    assert len(engine.calls) - 7 == 3  # three distinct menus: one neutral call each


def test_calibrate_writes_options_that_routers_read(tmp_path: Path) -> None:
    # The model answers DONE everywhere; the word evidence knows better, so a prior wins.
    engine = LogitEngine({"DONE": 2.0})
    dev = Dataset("house", TREE, [query("1", "pay the water bill", "billing/pay_water"),
                                  query("2", "split the rent with a housemate",
                                        "transfers/split_rent"),
                                  query("3", "knit a scarf")], PromptStyle())
    result = calibrate(engine, {"house": evidence_source(TREE)}, [dev])
    assert result.measured["model_alone"]["house"]["path_accuracy"] == round(1 / 3, 4)
    assert result.measured["chosen"]["by_dataset"]["house"]["path_accuracy"] == 1.0
    assert result.options.evidence_weight > 0
    path = tmp_path / "fake.calibration.json"
    result.write(path)
    assert read_calibration(path) == result.options
    assert json.loads(path.read_text())["model"] == "fake-model"


def test_gold_paths_must_be_leaves_of_the_catalog() -> None:
    from stackroute.runtime.errors import InputError

    with pytest.raises(InputError, match="query '7': gold path 'billing' is a router"):
        check_gold_paths(TREE, [query("7", "bills", "billing")], source="dev.jsonl")


# -- the command --------------------------------------------------------------------------------
TINY_CATALOG = {
    "name": "home", "description": "Home services.",
    "children": [
        {"name": "billing", "description": "Household bills.", "children": [
            {"name": "pay_water", "description": "Pay the water bill."},
            {"name": "pay_power", "description": "Pay the electricity bill."}]},
        {"name": "weather", "description": "Weather forecasts.", "children": [
            {"name": "forecast", "description": "The weather forecast for a city."},
            {"name": "alerts", "description": "Storm and flood alerts for a region."}]},
    ],
}
TINY_QUERIES = [
    {"id": "q1", "query": "Pay my water bill", "gold": ["billing/pay_water"]},
    {"id": "q2", "query": "Will it rain in Oslo tomorrow?", "gold": ["weather/forecast"]},
    {"id": "q3", "query": "Write a poem about cats", "gold": []},
    {"id": "q4", "query": "Any storm alerts near the coast?", "gold": ["weather/alerts"]},
]


def write_inputs(directory: Path, queries: list[dict[str, object]]) -> None:
    (directory / "home.catalog.json").write_text(json.dumps(TINY_CATALOG))
    (directory / "dev.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))


def words(output: str) -> str:
    return " ".join(output.split())


@pytest.mark.parametrize(("args", "message"), [
    (["--queries", "dev.jsonl"], "a catalog is required: --catalog FILE"),
    (["--queries", "nope.jsonl", "--catalog", "home.catalog.json"],
     "--queries: file nope.jsonl does not exist"),
    (["--queries", "dev.jsonl", "--catalog", "nope.json"],
     "--catalog: file nope.json does not exist"),
    (["--queries", "dev.jsonl", "--catalog", "home.catalog.json", "--limit", "0"],
     "--limit must be at least 1, got 0"),
])
def test_calibrate_refuses_bad_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     args: list[str], message: str) -> None:
    monkeypatch.chdir(tmp_path)
    write_inputs(tmp_path, TINY_QUERIES)
    result = runner.invoke(app, ["calibrate", *args])
    assert result.exit_code == 2, result.output
    assert message in words(result.output)


def test_calibrate_names_the_query_whose_gold_path_is_not_in_the_catalog(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write_inputs(tmp_path, [*TINY_QUERIES[:2], {"id": "q9", "query": "Pay gas",
                                                "gold": ["billing/pay_gas"]}])
    result = runner.invoke(app, ["calibrate", "--queries", "dev.jsonl",
                                 "--catalog", "home.catalog.json"])
    assert result.exit_code == 2, result.output
    assert "dev.jsonl: query 'q9': gold path 'billing/pay_gas' is not in the catalog" \
        in words(result.output)
    assert not list(tmp_path.glob("*.calibration.json"))


def calibrated(directory: Path, model_dir: Path, queries: list[dict[str, object]],
               *args: str) -> dict[str, Any]:
    """`stackroute calibrate --json` on `queries` over the tiny catalog, run in `directory`."""
    write_inputs(directory, queries)
    result = runner.invoke(app, ["calibrate", "--queries", "dev.jsonl", "--catalog",
                                 "home.catalog.json", "--model", str(model_dir), "--json",
                                 *args])
    assert result.exit_code == 0, result.output
    out: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return out


@pytest.mark.model
def test_calibrate_writes_a_file_that_routing_accepts(
        embedded_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    out = calibrated(tmp_path, embedded_model_dir, TINY_QUERIES, "--limit", "3")
    path = Path(out["file"])
    assert path.parent == Path(".") and path.name.endswith(".calibration.json")
    assert out["dev"] == {"home": 3}
    assert set(out["chosen"]["by_dataset"]) == {"home"}
    options = router_options(out["model"], calibration=path)
    assert options.policy is Policy.GUIDED
    assert options.recovery == read_calibration(path)
    assert options.calibration == path.name


ABSTENTION_QUERIES = [
    *({"id": f"in{n}", "query": text, "gold": [gold]} for n, (text, gold) in enumerate([
        ("Pay my water bill", "billing/pay_water"),
        ("Settle the electricity bill for this month", "billing/pay_power"),
        ("Pay the power company", "billing/pay_power"),
        ("What is the weather forecast for Rome?", "weather/forecast"),
        ("Forecast for Berlin this weekend", "weather/forecast"),
        ("Are there flood alerts for the river region?", "weather/alerts"),
        ("Any storm alerts near the coast?", "weather/alerts")])),
    *({"id": f"out{n}", "query": text, "gold": []} for n, text in enumerate([
        "Write a poem about cats", "Who won the football match yesterday?",
        "Translate hello into Japanese", "Book a table for two at an Italian restaurant",
        "How many legs does a spider have?", "Recommend a good science fiction novel"])),
]


@pytest.mark.model
def test_calibrate_fits_the_abstention_check_that_abstain_then_uses(
        embedded_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    out = calibrated(tmp_path, embedded_model_dir, ABSTENTION_QUERIES, "--abstention")
    check = out["abstention"]
    print(f"\nabstention fit: {check['features']}, {check['options']}")
    assert check["num_abstain"] == 6 and check["num_call"] >= 5
    assert check["dev_successes_stopped"] == 0  # 2% of 7 allows none
    assert check["dev_out_of_scope_stopped"] > 0.5 and check["probe_model_calls"] > 0
    path = Path(out["file"])
    assert router_options(out["model"], calibration=path).abstention is None  # opt-in
    fitted = router_options(out["model"], calibration=path, abstain=True).abstention
    assert fitted is not None and fitted.to_dict() == check["options"]


def test_calibrate_says_what_the_abstention_fit_lacks_before_measuring_anything(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write_inputs(tmp_path, TINY_QUERIES)  # one query no leaf serves
    result = runner.invoke(app, ["calibrate", "--queries", "dev.jsonl", "--catalog",
                                 "home.catalog.json", "--abstention", "--thresholds-only"])
    assert result.exit_code == 2, result.output
    assert "fitting the abstention check needs at least 5 dev queries no leaf serves " \
        "(gold []); the queries hold 1" in words(result.output)
    assert not list(tmp_path.glob("*.calibration.json"))


@pytest.mark.model
def test_calibrate_refuses_an_out_file_it_cannot_keep_before_measuring(
        embedded_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--out` names a file that is not a calibration: refused before the model is asked
    anything (the file's sections are kept on a rewrite, so it must be readable; finding that
    out after an hour of model calls would lose them), and the file is left as it was."""
    monkeypatch.chdir(tmp_path)
    write_inputs(tmp_path, TINY_QUERIES)
    (tmp_path / "notes.json").write_text("my notes, not JSON", encoding="utf-8")

    def measured(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the model was asked before the --out file was checked")

    monkeypatch.setattr("stackroute.server.tools.calibrate.calibrate", measured)
    result = runner.invoke(app, ["calibrate", "--queries", "dev.jsonl", "--catalog",
                                 "home.catalog.json", "--model", str(embedded_model_dir),
                                 "--out", "notes.json"])
    assert result.exit_code == 2, result.output
    assert "notes.json: expected a calibration file (JSON)" in words(result.output)
    assert (tmp_path / "notes.json").read_text(encoding="utf-8") == "my notes, not JSON"
