"""Routing that can change its mind: the evidence prior, backtracking, the beam, the fallback
and calibrated scoring.

Tiers (a)/(b) run the real stack machine and router against a scripted engine (option logits
from a table) and a bag-of-words embedder, asserting on decisions and the trace. One tier (c)
test runs the embedded model and the real embedder on a small generated catalog.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

import pytest
from doubles import LogitEngine, then_done
from recovery_kit import evidence_source, house_tree, run
from stackroute.runtime.errors import InputError
from stackroute.runtime.machine import StackMachine
from stackroute.runtime.router import RoutingRequest, ScriptedRouter
from stackroute.runtime.state import RunState
from stackroute.server.routing.menu_scoring import MenuScorer
from stackroute.server.routing.options import DraftSource, RouterOptions
from stackroute.server.routing.recovery import (
    RecoveryOptions,
    RecoveryPolicy,
    child_request,
    is_fresh,
)
from stackroute.server.routing.router import EngineRouter, build_machine
from stackroute.server.tools.evaluate import Query, run_query

WATER = "Pay the water bill now"
EVIDENCE_ONLY: dict[str, Any] = {"is_backtracking_enabled": False, "is_fallback_enabled": False}


def routes(state: RunState) -> list[tuple[str, str]]:
    return [(e.path, e.decision or "") for e in state.trace if e.kind.value == "route"]


def route_details(state: RunState) -> list[dict[str, Any]]:
    return [dict(e.detail) for e in state.trace if e.kind.value == "route"]


def called(state: RunState) -> list[str]:
    return [c["path"] for c in state.calls]


# -- switches --------------------------------------------------------------------------------

def test_everything_off_is_plain_routing() -> None:
    tree = house_tree()
    logits = then_done({"transfers": 1.0, "send_gift": 2.0})
    plain_engine, off_engine = LogitEngine(logits), LogitEngine(logits)
    plain = run_query(build_machine(tree, plain_engine),
                      Query(id="p", query=WATER, gold=(), args=None, tags=()))
    off = run(tree, off_engine, WATER, **RecoveryOptions.off().to_dict())
    assert routes(off) == routes(plain) == [
        ("", "transfers"), ("transfers", "send_gift"), ("transfers", "DONE"), ("", "DONE")]
    assert all(c.bias is None for c in off_engine.calls)
    assert [c.prompt for c in off_engine.calls] == [c.prompt for c in plain_engine.calls]
    assert off.usage.model_calls == plain.usage.model_calls


def test_options_reject_unknown_keys_and_bad_values() -> None:
    with pytest.raises(InputError, match="unknown recovery option"):
        RecoveryOptions.from_dict({"beam": 2})
    with pytest.raises(InputError, match="beam_width"):
        RecoveryOptions(beam_width=0)
    assert not RecoveryOptions.off().needs_evidence
    options = RecoveryOptions(beam_width=3, evidence_aggregate="softmax")  # type: ignore[arg-type]
    assert RecoveryOptions.from_dict(options.to_dict()) == options


def test_recovery_needing_evidence_without_it_is_refused() -> None:
    with pytest.raises(ValueError, match="EvidenceSource"):
        EngineRouter(LogitEngine({}), RouterOptions(recovery=RecoveryOptions(),
                                                   speculation=DraftSource.OFF))


# -- the evidence prior ----------------------------------------------------------------------

@pytest.mark.parametrize(("weight", "first"), [(0.0, "transfers"), (1.0, "billing")])
def test_prior_moves_a_decision(weight: float, first: str) -> None:
    engine = LogitEngine(then_done({"transfers": 0.5}))
    state = run(house_tree(), engine, WATER, evidence_weight=weight, **EVIDENCE_ONLY)
    assert routes(state)[0] == ("", first)
    if weight:
        detail = route_details(state)[0]
        assert detail["prior"]["billing"] == 0.0 and detail["prior"]["transfers"] < -10
        assert detail["evidence_top"][0][0] == "billing/pay_water"
        assert detail["raw"]["transfers"] > detail["raw"]["billing"]  # the model alone


def test_prior_pushes_done_for_an_out_of_scope_request() -> None:
    engine = LogitEngine({"billing": 3.0})
    state = run(house_tree(), engine, "what is the capital of peru", **EVIDENCE_ONLY)
    assert routes(state) == [("", "DONE")]
    assert called(state) == []


def test_raw_probabilities_are_the_unbiased_model() -> None:
    tree = house_tree()
    engine = LogitEngine({"billing": 0.3, "transfers": 1.1, "DONE": 0.7})
    machine = StackMachine(tree, ScriptedRouter([]))
    state = machine.start(WATER)
    request = RoutingRequest(run_id="r", step=0, depth=0, task=WATER, node=tree.root,
                             menu=machine.menu_for(state, state.top()),
                             prompt=machine.layout.routing_prompt(state), layout=machine.layout)
    scorer = MenuScorer(engine, evidence=evidence_source(tree),
                        prior=RecoveryOptions().prior)
    scored = scorer.score(request)
    plain = engine.choose(request.prompt, request.menu.options).probabilities
    for option, p in scored.raw_probabilities().items():
        assert p == pytest.approx(plain[option], rel=1e-9)
    assert scored.choice == "billing" and plain["transfers"] > plain["billing"]
    again = scorer.score(request)
    assert again.is_reused and again.usage.model_calls == 0


# -- backtracking ----------------------------------------------------------------------------

@pytest.mark.parametrize("weight", [0.0, 1.0])
def test_evidence_backtracks_and_the_parent_picks_the_next_sibling(weight: float) -> None:
    engine = LogitEngine(then_done({"transfers": 40.0, "split_rent": 1.0}))
    state = run(house_tree(), engine, WATER, evidence_weight=weight, is_fallback_enabled=False)
    assert routes(state)[:3] == [("", "transfers"), ("transfers", "BACK"), ("", "billing")]
    assert called(state) == ["billing/pay_water"]
    detail = route_details(state)[1]
    if weight == 0:  # the override: the model said split_rent, the evidence disagreed
        back = detail["backtrack"]
        assert back["from"] == "split_rent" and "elsewhere" in back["reason"]
    else:  # the prior alone made BACK the model's own choice
        assert "backtrack" not in detail and detail["prior"]["BACK"] == 0.0
    kinds = [e.kind.value for e in state.trace]
    assert "pop_back" in kinds
    root_menu_after = next(e.menu for e in state.trace if e.kind.value == "route"
                           and e.path == "" and e.decision == "billing")
    assert root_menu_after is not None and "transfers" not in root_menu_after


def test_low_confidence_backtracks() -> None:
    engine = LogitEngine(then_done({"transfers": 5.0, "billing": 2.0, "pay_water": 3.0}))
    state = run(house_tree(), engine, WATER, evidence_weight=0.0, backtrack_gap=None,
                min_confidence=0.5, is_fallback_enabled=False)
    assert routes(state)[:4] == [("", "transfers"), ("transfers", "BACK"), ("", "billing"),
                                 ("billing", "pay_water")]
    assert "p=0.250" in route_details(state)[1]["backtrack"]["reason"]


@pytest.mark.parametrize(("enabled", "calls"), [(True, ["billing/pay_water"]), (False, [])])
def test_evidence_overrules_a_wrong_back(enabled: bool, calls: list[str]) -> None:
    engine = LogitEngine(then_done({"billing": 5.0, "BACK": 5.0, "DONE": 1.0}))
    state = run(house_tree(), engine, WATER, evidence_weight=0.0,
                is_backtracking_enabled=enabled, is_fallback_enabled=False)
    assert called(state) == calls
    if enabled:
        veto = route_details(state)[1]["back_veto"]
        assert veto["to"] == "pay_water" and "lead" in veto["reason"]


def test_backtracking_only_in_fresh_inner_frames() -> None:
    # transfers after its child `abroad` went BACK: BACK is on the menu, the frame not fresh
    tree = house_tree()
    requests = _requests(tree, ["transfers", "abroad", "BACK", "send_gift", "DONE", "DONE"])
    after_back = requests[3]
    assert "BACK" in after_back.menu and not is_fresh(after_back)
    options = RecoveryOptions(evidence_weight=0.0, backtrack_gap=None, min_confidence=0.9,
                              is_fallback_enabled=False)
    policy = RecoveryPolicy(MenuScorer(LogitEngine({})), options)
    assert policy.decide(after_back).choice == "split_rent"  # unsure, but kept
    assert policy.decide(requests[1]).choice == "BACK"  # fresh and unsure: back
    assert policy.decide(requests[0]).choice == "billing"  # the root never backtracks


# -- recall: the evidence decides a frame after its BACKs ------------------------------------

@pytest.mark.parametrize(("after", "calls"), [(1, ["billing/pay_water"]), (None, ["weather"])])
def test_after_its_backs_the_evidence_decides_the_frame(after: int | None,
                                                       calls: list[str]) -> None:
    # a model sure of the wrong branches: transfers (left with BACK), then the weather leaf
    engine = LogitEngine(then_done({"transfers": 40.0, "weather": 30.0, "split_rent": 1.0}))
    state = run(house_tree(), engine, WATER, evidence_weight=0.0, is_fallback_enabled=False,
                recall_after_backs=after)
    assert called(state) == calls
    if after is not None:
        assert routes(state)[:4] == [("", "transfers"), ("transfers", "BACK"), ("", "billing"),
                                     ("billing", "pay_water")]
        recall = route_details(state)[2]["recall"]
        assert recall["abandoned"] == ["transfers"] and recall["leaf"] == "billing/pay_water"
        events = [e for e in state.trace if e.kind.value == "route"]
        assert events[2].usage is not None and events[2].usage["model_calls"] == 0
        assert route_details(state)[3]["plan"]["reason"] == "fallback"


@pytest.mark.parametrize(("after", "calls"), [(2, []), (None, ["weather"])])
def test_with_its_branches_spent_an_out_of_scope_request_ends_with_no_call(
        after: int | None, calls: list[str]) -> None:
    # the model opens branch after branch and goes BACK from each; nothing fits the request
    engine = LogitEngine(then_done({"transfers": 40.0, "billing": 30.0, "BACK": 50.0,
                                    "DONE": -10.0}))
    state = run(house_tree(), engine, "what is the capital of peru", evidence_weight=0.0,
                recall_after_backs=after)
    assert called(state) == calls
    if after is not None:
        assert routes(state)[-1] == ("", "DONE")
        assert route_details(state)[-1]["recall"]["abandoned"] == ["billing", "transfers"]


# -- beam over branches -----------------------------------------------------------------------

BEAM_LOGITS = {"billing": 0.1, "transfers": 0.0, "weather": -5.0, "DONE": -5.0,
               "split_rent": 3.0}
BEAM_ONLY: dict[str, Any] = {"evidence_weight": 0.0, "is_backtracking_enabled": False,
                             "is_fallback_enabled": False}


def test_beam_picks_the_subtree_with_the_better_leaf() -> None:
    engine = LogitEngine(then_done(BEAM_LOGITS))
    state = run(house_tree(), engine, "something about money", beam_width=2, **BEAM_ONLY)
    assert called(state) == ["transfers/split_rent"]
    first, second = route_details(state)[:2]
    beam = first["beam"]
    assert [c["leaf"] for c in beam["candidates"]] == ["billing/pay_water",
                                                       "transfers/split_rent"]
    assert beam["chosen"] == "transfers" and beam["extra_calls"] == 2
    assert second["plan"] == {"reason": "beam", "leaf": "transfers/split_rent"}
    assert second["is_reused"]  # the beam explored this very prompt
    route_events = [e for e in state.trace if e.kind.value == "route"]
    assert route_events[0].usage is not None and route_events[0].usage["model_calls"] == 3
    assert route_events[1].usage is not None and route_events[1].usage["model_calls"] == 0
    # the choice was free, and a leaf without parameters needs no arguments call
    # root and two descents; the two DONEs that unwind are the finish rule's, not the model's
    assert len(engine.routing_calls()) == 3
    assert [e.path for e in route_events if e.detail.get("finish")] == ["transfers", ""]


def test_without_the_beam_the_greedy_pick_stands() -> None:
    engine = LogitEngine(then_done(BEAM_LOGITS))
    state = run(house_tree(), engine, "something about money", **BEAM_ONLY)
    assert called(state) == ["billing/pay_water"]


def test_beam_waits_for_a_close_call() -> None:
    engine = LogitEngine(then_done({**BEAM_LOGITS, "billing": 3.0}))
    state = run(house_tree(), engine, "something about money", beam_width=2, **BEAM_ONLY)
    assert "beam" not in route_details(state)[0]
    assert called(state) == ["billing/pay_water"]


# -- global fallback --------------------------------------------------------------------------

def test_fallback_routes_done_at_the_root_to_the_best_leaf() -> None:
    engine = LogitEngine(then_done({"DONE": 5.0}))
    state = run(house_tree(), engine, WATER, evidence_weight=0.0)
    assert called(state) == ["billing/pay_water"]
    first, second = route_details(state)[:2]
    assert first["fallback"]["leaf"] == "billing/pay_water" and first["fallback"]["from"] == "DONE"
    assert second["plan"]["reason"] == "fallback"
    event = [e for e in state.trace if e.kind.value == "route"][1]
    assert event.probabilities is None and event.usage is not None
    assert event.usage["model_calls"] == 0  # the choice took no call, nor do empty arguments


def test_no_fallback_for_an_out_of_scope_request() -> None:
    engine = LogitEngine(then_done({"DONE": 5.0}))
    state = run(house_tree(), engine, "what is the capital of peru", evidence_weight=0.0)
    assert routes(state) == [("", "DONE")] and called(state) == []


def test_no_fallback_once_the_run_has_calls() -> None:
    engine = LogitEngine(then_done({"weather": 9.0}))
    state = run(house_tree(), engine, WATER, evidence_weight=0.0)
    assert called(state) == ["weather"]
    assert routes(state)[-1] == ("", "DONE")


# -- calibrated scoring -----------------------------------------------------------------------

def test_contrast_removes_the_request_independent_preference() -> None:
    tree = house_tree()
    logits = then_done({"DONE": 5.5, "billing": 1.0})
    neutral = {"DONE": 5.0}
    options = RouterOptions(recovery=replace(RecoveryOptions.off(), is_contrast_enabled=True),
                            speculation=DraftSource.OFF)
    engine = LogitEngine(logits, neutral=neutral)
    machine = build_machine(tree, engine, options=options)
    first = run_query(machine, Query(id="a", query=WATER, gold=(), args=None, tags=()))
    assert routes(first)[0] == ("", "billing")
    detail = route_details(first)[0]
    assert next(iter(detail["raw"])) == "DONE" and next(iter(detail["calibrated"])) == "billing"
    num_neutral = sum(c.is_neutral for c in engine.calls)
    second = run_query(machine, Query(id="b", query="pay power", gold=(), args=None, tags=()))
    assert routes(second)[0] == ("", "billing")
    root_neutral = [c for c in engine.calls if c.is_neutral and len(c.prompt.messages) == 2]
    assert len(root_neutral) == 1  # one neutral call per menu, shared by every request
    assert sum(c.is_neutral for c in engine.calls) == num_neutral
    plain = run_query(build_machine(tree, LogitEngine(logits, neutral=neutral)),
                      Query(id="c", query=WATER, gold=(), args=None, tags=()))
    assert routes(plain) == [("", "DONE")]


def test_contrast_applies_to_fresh_frames_only() -> None:
    # After a result the model's taste for DONE is what ends the task: no contrast there.
    def logits(prompt: Any, options: tuple[str, ...]) -> dict[str, float]:
        after = " returned: " in prompt.messages[-1].content
        return {"DONE": 1.0, "weather": 0.5} if after else {"DONE": 3.0, "weather": 1.0}

    options = RouterOptions(recovery=replace(RecoveryOptions.off(), is_contrast_enabled=True),
                            speculation=DraftSource.OFF)
    machine = build_machine(house_tree(), LogitEngine(logits, neutral={"DONE": 5.0}),
                            options=options)
    state = run_query(machine, Query(id="f", query="weather in Oslo", gold=(), args=None,
                                     tags=()))
    assert called(state) == ["weather"] and routes(state)[-1] == ("", "DONE")
    assert "calibrated" in route_details(state)[0]
    assert "calibrated" not in route_details(state)[1]


def test_neutral_prompt_is_the_same_path_with_a_content_free_request() -> None:
    from stackroute.server.routing.contrast import NEUTRAL_REQUEST, neutral_prompt

    tree = house_tree()
    requests = _requests(tree, ["billing", "pay_water", "DONE", "DONE"])
    inner = requests[1]
    prompt = neutral_prompt(inner)
    assert prompt.messages[0] == inner.prompt.messages[0]
    assert f"Request: {NEUTRAL_REQUEST}\n" in prompt.messages[1].content
    assert f"Request: {WATER}" not in " ".join(m.content for m in prompt.messages)
    assert prompt.messages[2:] == inner.prompt.messages[2:]


# -- hypothetical frames ----------------------------------------------------------------------

def test_child_request_is_the_prompt_the_runtime_sends() -> None:
    tree = house_tree()
    requests = _requests(tree, ["transfers", "BACK", "billing", "pay_water", "DONE", "DONE"])
    predicted = child_request(requests[0], tree.node("transfers"))
    assert predicted.prompt == requests[1].prompt and predicted.menu == requests[1].menu
    assert [is_fresh(r) for r in requests] == [True, True, False, True, False, False]


def _requests(tree: Any, script: list[str]) -> list[RoutingRequest]:
    seen: list[RoutingRequest] = []
    inner = ScriptedRouter(script)

    class Recording:
        def route(self, request: RoutingRequest) -> Any:
            seen.append(request)
            return inner.route(request)

    machine = StackMachine(tree, Recording())
    run_query(machine, Query(id="s", query=WATER, gold=(), args=None, tags=()))
    return seen


# -- tier (c): the embedded model and the real embedder ----------------------------------------

@pytest.mark.model
def test_real_model_and_embedder_record_confidence_and_recover(engine: Any,
                                                               tmp_path: Any) -> None:
    from stackroute.bench.workloads.generate import generate_suite
    from stackroute.runtime.catalog import build_tree
    from stackroute.server.embeddings.embedder import Embedder
    from stackroute.server.routing.router import evidence_for_tree

    suite = generate_suite("semantic-overlap", num_leaves=16, seed=0)
    tree = build_tree(suite.catalog)
    evidence = evidence_for_tree(tree, Embedder(), cache_dir=tmp_path)
    assert list((tmp_path / "evidence").glob("leaves-*.npy"))
    query = next(q for q in suite.queries if q["tags"] == ["clear"])
    options = RouterOptions(recovery=RecoveryOptions(beam_width=2, beam_margin=10.0,
                                                     is_contrast_enabled=True),
                            speculation=DraftSource.OFF, max_argument_tokens=2)
    machine = build_machine(tree, engine, options=options, evidence=evidence)
    state = machine.start(query["query"])
    machine.step(state)  # the root decision, with the beam over every close child
    event = next(e for e in state.trace if e.kind.value == "route")
    detail = dict(event.detail)
    assert event.probabilities is not None
    assert math.isclose(sum(event.probabilities.values()), 1.0, rel_tol=1e-6)
    assert set(detail["prior"]) <= set(event.menu or ())
    assert detail["evidence_top"][0][1] >= detail["evidence_top"][-1][1]
    raw = detail["raw"]
    plain = engine.choose(machine.layout.routing_prompt(machine.start(query["query"])),
                          event.menu).probabilities
    for option, p in raw.items():  # the bias is undone exactly, on the real trie walk
        assert p == pytest.approx(plain[option], abs=2e-3)
    beam = detail.get("beam")
    if beam is not None:  # the chosen subtree's frame is then answered from the memo
        machine.step(state)
        planned = [e for e in state.trace if e.kind.value == "route"][1]
        assert dict(planned.detail).get("is_reused") is True
        assert planned.decision == beam["candidates"][[c["child"] for c in beam["candidates"]]
                                                      .index(beam["chosen"])]["leaf"] \
            .split("/")[-1]


def test_recall_comes_from_the_calibration_and_the_flag_or_setting_overrides(
        tmp_path: Any) -> None:
    from stackroute.server.routing.calibration import router_options
    from stackroute.server.settings import ServerSettings

    path = tmp_path / "m.json"
    path.write_text(json.dumps({"model": "m", "options": {}, "measured": {}}), encoding="utf-8")

    def recall(options: RouterOptions) -> int | None:
        assert options.recovery is not None
        return options.recovery.recall_after_backs

    assert recall(router_options("m", calibration=path)) == 2  # RecoveryOptions' default
    path.write_text(json.dumps({"model": "m", "options": {"recall_after_backs": 3}}),
                    encoding="utf-8")
    assert recall(router_options("m", calibration=path)) == 3
    assert recall(router_options("m", calibration=path, recall_after_backs=1)) == 1
    assert recall(router_options("m", calibration=path, recall_after_backs=0)) is None  # off
    settings = ServerSettings(recall_after_backs=0, calibration=path)
    assert recall(settings.router_options("m")) is None
