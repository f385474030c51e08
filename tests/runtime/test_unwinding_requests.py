"""The machine's prediction of the requests that unwind the stack after DONE answers
(`RoutingRequest.after_done`, `unwinding_requests`) is exactly what it asks after a real
DONE, and computing it changes nothing in the run."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from machine_kit import BANK_CATALOG, drive
from stackroute.runtime.catalog import build_tree
from stackroute.runtime.errors import StateError
from stackroute.runtime.governance import Limits
from stackroute.runtime.machine import StackMachine
from stackroute.runtime.router import RoutingRequest, ScriptedRouter, ScriptStep
from stackroute.runtime.speculation import matches, unwinding_requests
from stackroute.runtime.trace import EventKind
from test_resume import catalogs, gate_policy, new_machine, seeded_script


class Predicting:
    """Records every request and, while it is current, the machine's unwinding chain."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.requests: list[RoutingRequest] = []
        self.chains: list[list[RoutingRequest]] = []

    def route(self, request: RoutingRequest) -> Any:
        self.requests.append(request)
        self.chains.append(unwinding_requests(request))
        return self.inner.route(request)


def bank_run(script: list[ScriptStep], limits: Limits | None = None,
             ) -> tuple[Predicting, Any]:
    recorder = Predicting(ScriptedRouter(script))
    machine = StackMachine(build_tree(BANK_CATALOG), recorder, limits=limits)
    state = machine.start("March statement", run_id="r")
    drive(machine, state)
    return recorder, state


def test_three_levels_unwind_as_predicted_after_the_leaf_call() -> None:
    recorder, state = bank_run(["accounts", "statements", ("monthly", {"month": 3}),
                                "DONE", "DONE", "DONE"])
    assert state.status.value == "done"
    chain = recorder.chains[3]  # statements, after monthly returned
    assert [r.node.path_str for r in chain] == ["accounts/statements", "accounts", ""]
    assert [matches(p, a) for p, a in zip(chain, recorder.requests[3:], strict=True)] == \
        [True, True, True]
    assert [r.menu.options for r in chain] == [("monthly", "DONE"),
                                              ("open_account", "statements", "DONE"),
                                              ("payments", "accounts", "weather", "DONE")]


def test_two_levels_unwind_as_predicted() -> None:
    recorder, _ = bank_run(["payments", "balance", "DONE", "DONE"])
    chain = recorder.chains[2]
    assert [r.node.path_str for r in chain] == ["payments", ""]
    assert all(matches(p, a) for p, a in zip(chain, recorder.requests[2:], strict=True))


def test_a_parent_with_a_tried_child_gets_the_menu_without_it() -> None:
    recorder, _ = bank_run(["payments", "BACK", "accounts", "statements",
                            ("monthly", {"month": 3}), "DONE", "DONE", "DONE"])
    chain = recorder.chains[5]
    assert chain[-1].menu.options == ("accounts", "weather", "DONE")  # payments was left
    assert all(matches(p, a) for p, a in zip(chain, recorder.requests[5:], strict=True))


TWO_CALLS: list[ScriptStep] = ["accounts", ("open_account", {"kind": "savings"}), "statements",
                               ("monthly", {"month": 3}), "DONE", "DONE", "DONE"]


@pytest.mark.parametrize(("limits", "levels"), [
    (Limits(), 3),
    (Limits(max_iterations=2), 1),  # accounts has routed twice: a limit, not a routing call
    (Limits(max_steps=6), 2),  # the root's call would be step 6
    (Limits(max_steps=5), 1),
])
def test_a_limit_ends_the_chain_where_the_machine_stops_routing(limits: Limits,
                                                                levels: int) -> None:
    recorder, state = bank_run(TWO_CALLS, limits)
    chain = recorder.chains[4]  # statements, after monthly returned
    assert len(chain) == levels
    assert all(matches(p, a) for p, a in zip(chain, recorder.requests[4:], strict=False))
    assert any(e.kind is EventKind.LIMIT for e in state.trace) is (levels < 3)


def test_no_chain_without_done_on_the_menu_or_at_the_root() -> None:
    recorder, _ = bank_run(["accounts", "statements", ("monthly", {"month": 3}),
                            "DONE", "DONE", "DONE"])
    assert [len(c) for c in recorder.chains] == [1, 1, 1, 3, 2, 1]


def test_the_prediction_leaves_the_run_untouched_and_goes_stale_after_the_step() -> None:
    tree = build_tree(BANK_CATALOG)
    seen: list[RoutingRequest] = []

    def script(request: RoutingRequest) -> ScriptStep:
        seen.append(request)
        return ["accounts", "statements", ("monthly", {"month": 3}), "DONE", "DONE",
                "DONE"][request.step]

    machine = StackMachine(tree, ScriptedRouter(script))
    state = machine.start("March statement", run_id="r")
    for _ in range(4):  # accounts, statements, monthly, its call
        machine.step(state)
    before = state.to_json()
    request = machine.request_for(state)
    assert len(unwinding_requests(request)) == 3
    assert [r.node.path_str for r in unwinding_requests(request, max_levels=2)] == \
        ["accounts/statements", "accounts"]
    assert state.to_json() == before
    machine.step(state)
    with pytest.raises(StateError, match="has moved on"):
        request.after_done()  # type: ignore[misc]
    assert matches(request, seen[-1])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=catalogs(), seed=st.integers(0, 2**32), max_steps=st.integers(4, 24),
       max_iterations=st.integers(1, 6))
def test_every_done_is_followed_by_the_predicted_request(
        doc: dict[str, Any], seed: int, max_steps: int, max_iterations: int) -> None:
    check_unwinding(build_tree(doc), seed, Limits(max_steps=max_steps,
                                                  max_iterations=max_iterations))


def test_the_property_sees_predictions_and_limits() -> None:
    tree = build_tree(BANK_CATALOG)
    counts = {True: 0, False: 0}
    for seed in range(80):
        for predicted, n in check_unwinding(tree, seed, Limits(max_steps=12,
                                                               max_iterations=3)).items():
            counts[predicted] += n
    assert counts[True] > 10 and counts[False] > 3, counts


def check_unwinding(tree: Any, seed: int, limits: Limits) -> dict[bool, int]:
    """Run a seeded script; wherever DONE popped a frame, the predicted next request exists
    exactly when the machine routed next, and then matches it. Counts by outcome."""
    recorder = Predicting(ScriptedRouter(seeded_script(seed)))
    machine = new_machine(tree, seed, limits, 0.0, router=recorder)
    state = machine.start("a random task", run_id="r")
    drive(machine, state, gate=gate_policy(seed))
    routes = [e for e in state.trace if e.kind is EventKind.ROUTE]
    counts = {True: 0, False: 0}
    for i, (event, chain) in enumerate(zip(routes, recorder.chains, strict=True)):
        following = state.trace[event.seq + 1] if event.seq + 1 < len(state.trace) else None
        if following is None or following.kind is not EventKind.POP_DONE:
            continue
        after = state.trace[event.seq + 2]
        routed_next = after.kind is EventKind.ROUTE
        assert (len(chain) > 1) is routed_next
        if routed_next:
            assert matches(chain[1], recorder.requests[i + 1])
        counts[routed_next] += 1
    return counts
