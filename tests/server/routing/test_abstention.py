"""The abstention check (server/routing/abstention.py): a scripted engine judges the chosen
leaf; the run ends with no call when the fitted decision says nothing fits, and calls the leaf
otherwise. State-machine tests: the real model's are in test_abstention_model.py."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest
from doubles import LogitEngine
from recovery_kit import evidence_source, house_tree
from stackroute.runtime.catalog import build_tree
from stackroute.runtime.errors import InputError
from stackroute.runtime.machine import StackMachine
from stackroute.runtime.prompt import Prompt
from stackroute.runtime.state import RunState
from stackroute.runtime.tree import Node
from stackroute.server.routing.abstention import (
    LEAD_RANK,
    NO,
    YES,
    AbstentionCheck,
    AbstentionFeatures,
    AbstentionOptions,
    read_abstention,
    write_abstention,
)
from stackroute.server.routing.arguments.filling import value_coverage
from stackroute.server.routing.arguments.menus import ValueMenus
from stackroute.server.routing.calibration import router_options
from stackroute.server.routing.options import DraftSource, Policy, RouterOptions
from stackroute.server.routing.plan import RoutingPlan, StepSource
from stackroute.server.routing.recovery import RecoveryOptions
from stackroute.server.routing.router import build_machine
from stackroute.server.tools import abstention_fit
from stackroute.server.tools.abstention_fit import (
    L2,
    LEARNING_RATE,
    STEPS,
    CrossValidated,
    Label,
    Sample,
    choose_features,
    cross_validate,
    fit_abstention,
    logistic_folds,
)
from stackroute.server.tools.evaluate import Query, run_query

# Trust the model's judgement alone: call when log p(yes) - log p(no) >= 0.
JUDGE_ONLY = AbstentionOptions(judge_weight=1.0, threshold=0.0)


def scripted(route: Mapping[str, float], says_yes: bool) -> LogitEngine:
    """Routes by `route`'s logits; answers the leaf question yes or no (by 4 nats)."""
    def logits(prompt: Prompt, options: tuple[str, ...]) -> Mapping[str, float]:
        if options == (YES, NO):
            return {YES: 4.0, NO: 0.0} if says_yes else {YES: 0.0, NO: 4.0}
        last = prompt.messages[-1].content
        if "DONE" in options and (" returned: " in last or " finished: " in last):
            return {"DONE": 50.0}
        return route
    return LogitEngine(logits)


def run(engine: LogitEngine, task: str, abstention: AbstentionOptions | None) -> RunState:
    tree = house_tree()
    options = RouterOptions(recovery=RecoveryOptions(is_fallback_enabled=False),
                            speculation=DraftSource.OFF, abstention=abstention)
    machine = build_machine(tree, engine, options=options, evidence=evidence_source(tree))
    return run_query(machine, Query(id="t", query=task, gold=(), args=None, tags=()))


def abstention_records(state: RunState) -> list[dict[str, object]]:
    return [dict(e.detail["abstention"]) for e in state.trace
            if e.kind.value == "route" and "abstention" in e.detail]


def test_a_leaf_the_model_rejects_is_not_called_and_the_run_ends_with_no_call() -> None:
    engine = scripted({"billing": 6.0, "pay_water": 6.0}, says_yes=False)
    state = run(engine, "tell me a joke about the water bill", JUDGE_ONLY)
    assert state.calls == [] and state.status.value == "done"
    records = abstention_records(state)
    assert records[0]["abstain"] is True and records[0]["leaf"] == "billing/pay_water"
    assert records[0]["features"]["judge"] == pytest.approx(-4.0, abs=1e-3)
    # Unwound with no model call: BACK out of billing, DONE at the root.
    unwind = [e.decision for e in state.trace if e.kind.value == "route"
              and e.detail.get("abstention", {}).get("unwind")]
    assert unwind == ["DONE"]
    assert [c.options for c in engine.calls].count((YES, NO)) == 2  # request + neutral


def test_a_leaf_the_model_accepts_is_called() -> None:
    engine = scripted({"billing": 6.0, "pay_water": 6.0}, says_yes=True)
    state = run(engine, "pay the water bill", JUDGE_ONLY)
    assert [c["path"] for c in state.calls] == ["billing/pay_water"]
    assert abstention_records(state)[0]["abstain"] is False


def test_without_the_check_the_same_run_calls_the_leaf() -> None:
    engine = scripted({"billing": 6.0, "pay_water": 6.0}, says_yes=False)
    state = run(engine, "tell me a joke about the water bill", None)
    assert [c["path"] for c in state.calls] == ["billing/pay_water"]
    assert abstention_records(state) == []
    assert not any(c.options == (YES, NO) for c in engine.calls)


def test_a_root_leaf_rejected_ends_at_the_root() -> None:
    engine = scripted({"weather": 6.0}, says_yes=False)
    state = run(engine, "sing me a song", JUDGE_ONLY)
    assert state.calls == [] and state.status.value == "done"


def test_the_neutral_question_is_asked_once_per_leaf() -> None:
    tree = house_tree()
    engine = scripted({"weather": 6.0}, says_yes=True)
    options = RouterOptions(recovery=RecoveryOptions(is_fallback_enabled=False),
                            speculation=DraftSource.OFF, abstention=JUDGE_ONLY)
    machine = build_machine(tree, engine, options=options, evidence=evidence_source(tree))
    for n, task in enumerate(("weather in Oslo", "weather in Rome")):
        run_query(machine, Query(id=str(n), query=task, gold=(), args=None, tags=()))
    neutral = [c for c in engine.calls if c.options == (YES, NO) and c.is_neutral]
    assert len(neutral) == 1


def test_the_evidence_features_weigh_in() -> None:
    # The model says yes, but a weight on the evidence score with a high bar stops the call.
    strict = AbstentionOptions(judge_weight=0.0, score_weight=1.0, threshold=2.0)
    engine = scripted({"weather": 6.0}, says_yes=True)
    state = run(engine, "weather in Oslo", strict)
    assert state.calls == []
    features = abstention_records(state)[0]["features"]
    assert 0.0 < features["score"] <= 1.0 and features["margin"] >= 0.0


def test_the_plan_has_an_abstained_source_only_when_the_check_is_on() -> None:
    guided = RouterOptions(recovery=RecoveryOptions(), speculation=DraftSource.OFF)
    on = RoutingPlan.build(RouterOptions(recovery=RecoveryOptions(), speculation=DraftSource.OFF,
                                         abstention=JUDGE_ONLY),
                           can_verify_paths=False, can_verify_levels=False)
    off = RoutingPlan.build(guided, can_verify_paths=False, can_verify_levels=False)
    assert on.sources == (StepSource.ABSTAINED, StepSource.GUIDED)
    assert off.sources == (StepSource.GUIDED,)


def test_options_refuse_unknown_keys_and_bad_numbers() -> None:
    with pytest.raises(InputError, match="unknown abstention option"):
        AbstentionOptions.from_dict({"judge_weight": 1.0, "tresh": 0.0})
    with pytest.raises(InputError, match="finite number"):
        AbstentionOptions(judge_weight=math.nan)
    with pytest.raises(InputError, match="true or false"):
        AbstentionOptions.from_dict({"is_contrast_enabled": "yes"})


def test_the_calibration_file_carries_the_check(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"model": "m", "options": {}, "measured": {}}), encoding="utf-8")
    assert read_abstention(path) is None
    assert router_options("m", calibration=path, abstain=True).abstention is None
    write_abstention(path, JUDGE_ONLY, {"num_call": 3})  # fitted, not on by default
    check = read_abstention(path)
    assert check is not None and check.options == JUDGE_ONLY and not check.is_default
    assert json.loads(path.read_text(encoding="utf-8"))["options"] == {}  # the rest kept
    assert router_options("m", calibration=path).abstention is None
    on = router_options("m", calibration=path, abstain=True)
    assert on.abstention == JUDGE_ONLY and on.describe()["abstention"] == "on"
    write_abstention(path, JUDGE_ONLY, {"num_call": 3}, is_default=True)
    assert router_options("m", calibration=path).abstention == JUDGE_ONLY
    assert router_options("m", calibration=path, abstain=False).abstention is None
    plain = router_options("m", calibration=path, policy=Policy.PLAIN, abstain=True)
    assert plain.abstention is None  # the check reads the guided policy's evidence


def test_fitting_keeps_every_dev_success_and_stops_what_it_can() -> None:
    def sample(judge: float, score: float, label: Label) -> Sample:
        return Sample(AbstentionFeatures(judge=judge, contrast=judge, score=score,
                                         margin=0.05, values=0.0, lead=0.1, named=1.0),
                      label)

    samples = [sample(2.0, 0.7, Label.CALL), sample(1.0, 0.6, Label.CALL),
               sample(-0.5, 0.65, Label.CALL), sample(-3.0, 0.3, Label.ABSTAIN),
               sample(-2.0, 0.4, Label.ABSTAIN), sample(1.5, 0.62, Label.ABSTAIN),
               sample(0.0, 0.1, Label.EITHER)]
    fitted = fit_abstention(samples)
    calls = [s for s in samples if s.label is Label.CALL]
    assert not any(fitted.options.abstains(s.features) for s in calls)
    assert fitted.measured["dev_successes_stopped"] == 0
    assert fitted.options.abstains(samples[3].features)
    assert fitted.options.abstains(samples[4].features)
    with pytest.raises(InputError, match="both kinds"):
        fit_abstention(calls)


PAYMENTS = {"name": "bank", "description": "A bank.", "children": [
    {"name": "payments", "description": "Send money and pay bills.", "children": [
        {"name": "send_money", "description": "Send an amount of money to a named person.",
         "parameters": {"type": "object", "required": ["payee", "amount"], "properties": {
             "payee": {"type": "string", "description": "who receives the money"},
             "amount": {"type": "number", "description": "amount in dollars"}}}},
        {"name": "payment_history", "description": "List recent payments."}]}]}


HELD_COVERAGE = 1.5  # "Send 500 dollars to Asha": the lowest prior of its values, Asha's


def values_only_machine() -> tuple[StackMachine, LogitEngine]:
    """The payments catalog under a check that weighs the request's values alone (the fit gave
    the model's answers no weight, so the check does not ask them)."""
    tree = build_tree(PAYMENTS)
    values_only = AbstentionOptions(values_weight=1.0, threshold=-1.0, is_judge_enabled=False)
    engine = scripted({"payments": 6.0, "send_money": 6.0}, says_yes=True)
    options = RouterOptions(recovery=RecoveryOptions(is_fallback_enabled=False),
                            speculation=DraftSource.OFF, abstention=values_only)
    return build_machine(tree, engine, options=options, evidence=evidence_source(tree)), engine


def test_the_values_feature_stops_a_call_the_request_holds_no_values_for_with_no_model_call(
        ) -> None:
    machine, engine = values_only_machine()
    held = run_query(machine, Query(id="a", query="Send 500 dollars to Asha", gold=(),
                                    args=None, tags=()))
    assert [c["path"] for c in held.calls] == ["payments/send_money"]
    empty = run_query(machine, Query(id="b", query="Tell me something interesting", gold=(),
                                     args=None, tags=()))
    assert empty.calls == [] and empty.status.value == "done"
    features = abstention_records(empty)[0]["features"]
    assert features["values"] == -4.0 and features["judge"] == 0.0
    # the lowest prior of the values it holds: "Asha" (1.5; "500 dollars" is in the unit the
    # amount's description counts in, 2.0)
    assert abstention_records(held)[0]["features"]["values"] == HELD_COVERAGE
    assert not any(c.options == (YES, NO) for c in engine.calls)


def test_recorded_features_from_before_a_feature_existed_are_refused_by_name() -> None:
    old = {"judge": 0.1, "contrast": 0.0, "score": 0.3, "margin": 0.1}
    with pytest.raises(InputError, match="lack values, lead, named"):
        AbstentionFeatures.from_dict(old)
    with pytest.raises(InputError, match="lack named"):
        AbstentionFeatures.from_dict({**old, "values": 1.0, "lead": 0.2})
    assert AbstentionFeatures.from_dict(
        {**old, "values": 1.0, "lead": 0.2, "named": 0.5}).named == 0.5


def _samples() -> list[Sample]:
    """`values` separates the kinds; the model's `judge` is noise (the 135M case)."""
    rows = [(0.5, 0.40, 2.0, Label.CALL), (-0.5, 0.45, 1.5, Label.CALL),
            (0.2, 0.50, 0.0, Label.CALL), (-0.2, 0.42, 3.0, Label.CALL),
            (0.4, 0.44, -4.0, Label.ABSTAIN), (-0.4, 0.41, -3.0, Label.ABSTAIN),
            (0.1, 0.46, -4.0, Label.ABSTAIN), (-0.1, 0.43, -2.5, Label.ABSTAIN)]
    return [Sample(AbstentionFeatures(judge=j, contrast=j, score=s, margin=0.05, values=v,
                                      lead=0.1, named=1.0), label) for j, s, v, label in rows]


def test_a_fit_on_some_features_weighs_only_those_and_asks_the_model_only_for_its_own() -> None:
    fitted = fit_abstention(_samples(), features=("score", "values")).options
    assert fitted.judge_weight == fitted.contrast_weight == fitted.margin_weight == 0.0
    assert fitted.values_weight > 0.0 and not fitted.is_judge_enabled
    assert not fitted.is_contrast_enabled
    judged = fit_abstention(_samples(), features=("judge", "values")).options
    assert judged.is_judge_enabled and not judged.is_contrast_enabled
    with pytest.raises(InputError, match="some of"):
        fit_abstention(_samples(), features=("score", "vibes"))


def test_leave_one_out_chooses_the_features_that_separate_and_prefers_no_model_call() -> None:
    samples = _samples()
    assert cross_validate(samples, ("values",)).out_of_scope_stopped == 4
    assert cross_validate(samples, ("judge",)).out_of_scope_stopped < 4
    chosen, ranked = choose_features(samples, candidates=[
        ("judge",), ("judge", "values"), ("values",), ("score", "values")])
    assert chosen == ("values",)  # as good as judge+values, and costs no model call
    assert ranked[0].net >= ranked[-1].net and ranked[-1].features == ("judge",)


def test_the_route_tree_says_why_a_run_made_no_call() -> None:
    import io

    from rich.console import Console
    from stackroute.server.commands.render import route_tree

    engine = scripted({"billing": 6.0, "pay_water": 6.0}, says_yes=False)
    state = run(engine, "tell me a joke about the water bill", JUDGE_ONLY)
    console = Console(width=120, record=True, file=io.StringIO())
    console.print(route_tree(state.trace))
    text = " ".join(console.export_text().split())
    assert "no call: pay_water does not fit the request (abstention fit -4.00 < 0.00)" in text



def test_a_check_that_asks_the_model_refuses_to_be_built_without_an_engine() -> None:
    from stackroute.server.routing.abstention import AbstentionCheck

    tree = house_tree()
    with pytest.raises(ValueError, match="needs an engine"):
        AbstentionCheck(None, JUDGE_ONLY, evidence_source(tree))
    free = AbstentionCheck(None, AbstentionOptions(score_weight=1.0, is_judge_enabled=False),
                           evidence_source(tree))
    x, usage = free.features("pay the water bill", tree.node("billing/pay_water"))
    assert usage.model_calls == 0 and x.judge == 0.0 and x.score > 0.0


def _catalog(names: list[str]) -> dict[str, object]:
    return {"name": "shop", "description": "A shop.", "children": [
        {"name": n, "description": f"{n.replace('_', ' ')} for a customer."} for n in names]}


def test_lead_is_the_best_leaf_over_the_tenth_best_or_the_last_in_a_small_catalog() -> None:
    model_free = AbstentionOptions(lead_weight=1.0, is_judge_enabled=False)
    twelve = [f"{verb}_{thing}" for verb in ("order", "return", "track")
              for thing in ("shoes", "coat", "hat", "scarf")]
    for names, rank in ((twelve, LEAD_RANK), (twelve[:3], 3)):
        tree = build_tree(_catalog(names))
        evidence = evidence_source(tree)
        check = AbstentionCheck(None, model_free, evidence)
        task = "track my shoes order"
        ranked = sorted(evidence.for_request(task).scores.tolist(), reverse=True)
        best, _ = evidence.for_request(task).best()
        x, usage = check.features(task, tree.node(best))
        assert x.lead == pytest.approx(ranked[0] - ranked[rank - 1], abs=1e-6)
        assert x.lead >= x.margin >= 0.0 and usage.model_calls == 0
    assert LEAD_RANK == 10 and len(twelve) > LEAD_RANK


def test_a_request_no_leaf_serves_has_a_smaller_lead_than_one_a_leaf_serves() -> None:
    tree = build_tree(_catalog([f"{verb}_{thing}" for verb in ("order", "return", "track")
                                for thing in ("shoes", "coat", "hat", "scarf")]))
    evidence = evidence_source(tree)
    check = AbstentionCheck(None, AbstentionOptions(is_judge_enabled=False), evidence)

    def lead(task: str) -> float:
        best, _ = evidence.for_request(task).best()
        return check.features(task, tree.node(best))[0].lead

    assert lead("return the scarf") > lead("what a lovely sunny morning")


def test_the_check_weighs_how_much_of_the_leafs_name_the_request_says() -> None:
    tree = build_tree(_catalog(["track_order", "return_order", "track_parcel"]))
    named_only = AbstentionOptions(named_weight=1.0, threshold=0.75, is_judge_enabled=False)
    check = AbstentionCheck(None, named_only, evidence_source(tree))
    said, _ = check.features("track my order", tree.node("track_order"))
    sibling, _ = check.features("cancel my order", tree.node("track_order"))
    assert (said.named, sibling.named) == (1.0, 0.5)
    assert not named_only.abstains(said) and named_only.abstains(sibling)


def test_leave_one_out_in_one_batch_matches_each_fold_fitted_alone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(7)
    samples = [Sample(AbstentionFeatures(
        judge=float(rng.normal(1.0 if label is Label.CALL else -0.5)), contrast=0.0,
        score=float(rng.normal(0.45 if label is Label.CALL else 0.35, 0.08)),
        margin=float(rng.uniform(0, 0.2)), values=0.0, lead=float(rng.uniform(0, 0.3)),
        named=1.0), label)
        for label in [Label.CALL] * 14 + [Label.ABSTAIN] * 6 + [Label.EITHER] * 2]
    features = ("judge", "score", "lead")
    for loss, num_in_scope in ((0.0, None), (0.1, 16)):
        oos = calls = 0
        for held in (s for s in samples if s.label is not Label.EITHER):
            rest = [s for s in samples if s is not held]
            check = fit_abstention(rest, max_call_loss=loss, num_in_scope=num_in_scope,
                                   features=features).options
            oos += check.abstains(held.features) and held.label is Label.ABSTAIN
            calls += check.abstains(held.features) and held.label is Label.CALL
        batched = cross_validate(samples, features, max_call_loss=loss,
                                 num_in_scope=num_in_scope)
        assert (batched.out_of_scope_stopped, batched.successes_stopped) == (oos, calls)
        assert oos > 0
        with monkeypatch.context() as small:  # folds in batches of 2: the same answer
            small.setattr(abstention_fit, "MAX_BATCH_CELLS", 2 * 20 * len(features))
            assert cross_validate(samples, features, max_call_loss=loss,
                                  num_in_scope=num_in_scope) == batched


def _descend_alone(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    """The fit written out for one set of samples: the reference for the batched one."""
    mean, std = x.mean(axis=0), x.std(axis=0)
    z = (x - mean) / std
    w, b = np.zeros(x.shape[1]), 0.0
    weight = np.where(y == 1, 0.5 / y.sum(), 0.5 / (len(y) - y.sum()))
    for _ in range(STEPS):
        g = weight * (1.0 / (1.0 + np.exp(-(z @ w + b))) - y)
        w = np.maximum(w - LEARNING_RATE * (z.T @ g + L2 * w / len(y)), 0.0)
        b -= LEARNING_RATE * float(g.sum())
    return w / std, b - float((w / std * mean).sum())


def test_each_batched_fold_is_the_fit_on_its_samples_alone() -> None:
    rng = np.random.default_rng(3)
    y = np.array([1.0] * 9 + [0.0] * 5)
    x = np.column_stack([rng.normal(y, 0.8), rng.normal(0.3 + 0.1 * y, 0.05),
                         rng.uniform(0, 1, len(y))])
    keep = np.ones((4, len(y)), dtype=bool)
    keep[[0, 1, 2, 3], [0, 5, 9, 13]] = False
    w, b = logistic_folds(x, y, keep)
    for fold in range(4):
        alone_w, alone_b = _descend_alone(x[keep[fold]], y[keep[fold]])
        assert np.allclose(w[fold], alone_w) and np.isclose(b[fold], alone_b)
    assert not np.allclose(w[0], w[1])  # the folds are fitted apart


def test_leave_one_out_skips_a_sample_alone_of_its_kind() -> None:
    def sample(score: float, label: Label) -> Sample:
        return Sample(AbstentionFeatures(judge=0.0, contrast=0.0, score=score, margin=0.1,
                                         values=0.0, lead=score, named=1.0), label)

    pair = [sample(0.6, Label.CALL), sample(0.2, Label.ABSTAIN)]
    assert cross_validate(pair, ("score",)) == CrossValidated(("score",), 0, 0)
    one_call = [sample(0.6, Label.CALL), sample(0.2, Label.ABSTAIN), sample(0.25, Label.ABSTAIN)]
    assert cross_validate(one_call, ("score",)).out_of_scope_stopped == 2
    with pytest.raises(InputError, match="needs in-scope successes and out-of-scope"):
        cross_validate([sample(0.6, Label.CALL)] * 3, ("score",))


def test_the_check_and_the_arguments_share_one_reading_of_the_leafs_values(
        monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[tuple[str, str]] = []
    original = ValueMenus.read.__func__  # type: ignore[attr-defined]

    def counted(cls: type[ValueMenus], leaf: Node, task: str) -> ValueMenus:
        reads.append((leaf.path_str, task))
        return original(cls, leaf, task)

    monkeypatch.setattr(ValueMenus, "read", classmethod(counted))
    machine, _ = values_only_machine()
    held = run_query(machine, Query(id="a", query="Send 500 dollars to Asha", gold=(),
                                    args=None, tags=()))
    assert [c["path"] for c in held.calls] == ["payments/send_money"]
    assert abstention_records(held)[0]["features"]["values"] == HELD_COVERAGE
    assert reads == [("payments/send_money", "Send 500 dollars to Asha")]


def test_value_menus_read_for_one_leaf_are_refused_for_another() -> None:
    tree = build_tree(PAYMENTS)
    send = tree.node("payments/send_money")
    menus = ValueMenus.read(send, "Send 500 dollars to Asha")
    assert value_coverage(send, "Send 500 dollars to Asha", menus=menus) == HELD_COVERAGE
    with pytest.raises(ValueError, match=r"read for 'payments/send_money'.*used for"):
        value_coverage(send, "Send 20 dollars to Ravi", menus=menus)
