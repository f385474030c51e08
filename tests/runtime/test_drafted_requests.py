"""The predicted requests of a drafted path are exactly the requests the machine makes."""

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
from stackroute.runtime.router import RoutingRequest, ScriptedRouter
from stackroute.runtime.speculation import descend, drafted_requests, matches
from stackroute.runtime.trace import EventKind
from test_resume import catalogs, gate_policy, new_machine, seeded_script


class Recorder:
    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.requests: list[RoutingRequest] = []

    def route(self, request: RoutingRequest) -> Any:
        self.requests.append(request)
        return self.inner.route(request)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=catalogs(), seed=st.integers(0, 2**32), max_depth=st.integers(2, 4))
def test_descend_predicts_the_next_request_after_every_push(
        doc: dict[str, Any], seed: int, max_depth: int) -> None:
    check_descents(build_tree(doc), seed, max_depth)


def test_the_property_sees_pushes_and_refused_pushes() -> None:
    tree = build_tree(BANK_CATALOG)
    counts = {True: 0, False: 0}
    for seed in range(60):
        for pushed, n in check_descents(tree, seed, max_depth=2).items():
            counts[pushed] += n
    assert counts[True] > 20 and counts[False] > 5, counts


def check_descents(tree: Any, seed: int, max_depth: int) -> dict[bool, int]:
    """Run a seeded script; at every router choice assert the predicted next request matches
    the real one exactly when the machine pushed (max_depth may refuse). Counts by outcome."""
    recorder = Recorder(ScriptedRouter(seeded_script(seed)))
    machine = new_machine(tree, seed, Limits(max_steps=30, max_depth=max_depth), 0.0,
                          router=recorder)
    state = machine.start("a random task", run_id="r")
    drive(machine, state, gate=gate_policy(seed))
    route_events = [e for e in state.trace if e.kind is EventKind.ROUTE]
    pushed_after = {e.seq for e in state.trace if e.kind is EventKind.PUSH}
    counts = {True: 0, False: 0}
    for i, (request, event) in enumerate(zip(recorder.requests, route_events, strict=True)):
        child = request.node.child(event.decision or "")
        if child is None or child.is_leaf or i + 1 >= len(recorder.requests):
            continue
        pushed = event.seq + 1 in pushed_after
        assert matches(descend(request, child.name), recorder.requests[i + 1]) is pushed
        counts[pushed] += 1
    return counts


def test_drafted_requests_follow_the_bank_path_and_check_the_leaf() -> None:
    tree = build_tree(BANK_CATALOG)
    script = ["accounts", "statements", ("monthly", {"month": 3}), "DONE", "DONE", "DONE"]
    recorder = Recorder(ScriptedRouter(script))
    machine = StackMachine(tree, recorder)
    state = machine.start("March statement", run_id="r")
    drive(machine, state)
    first = recorder.requests[0]
    predicted = drafted_requests(first, ["accounts", "statements", "monthly"])
    assert [matches(p, a) for p, a in zip(predicted, recorder.requests, strict=False)] == \
        [True, True, True]
    with pytest.raises(StateError, match="'nope' is not on the menu at accounts/statements"):
        drafted_requests(first, ["accounts", "statements", "nope"])
    with pytest.raises(StateError, match="is a leaf"):
        descend(first, "weather")
    with pytest.raises(ValueError, match="at least one option"):
        drafted_requests(first, [])
