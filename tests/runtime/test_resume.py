"""Serialisation and resume: a run resumed from any transition continues exactly as an
uninterrupted run would (tier b, with a property test over random trees and routers)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from machine_kit import (
    RecordingRouter,
    check_prefix_discipline,
    comparable,
    counting_clock,
    drive,
    events,
    make_machine,
)
from stackroute.runtime.catalog import build_tree
from stackroute.runtime.governance import Limits, RunStatus
from stackroute.runtime.handlers import HandlerTable, LocalExecutor
from stackroute.runtime.machine import StackMachine
from stackroute.runtime.router import RoutingRequest, ScriptedRouter, ScriptStep
from stackroute.runtime.state import PendingCall, RunState
from stackroute.runtime.tree import CapabilityTree

# -- the scenario of the "done means" -------------------------------------------------
SCENARIO = [
    "accounts", "statements", "BACK",                   # a wrong branch, left with BACK
    ("open_account", {"kind": "savings"}), "DONE",      # step one of the workflow
    "payments", ("send_money", {"payee": "Asha", "amount": 500}),  # step two: a gate
    "DONE", "DONE",
]
SCENARIO_EVENTS = [
    ("start", ""), ("route", ""), ("push", "accounts"), ("route", "accounts"),
    ("push", "accounts/statements"), ("route", "accounts/statements"),
    ("pop_back", "accounts/statements"), ("route", "accounts"), ("leaf_pending", "accounts"),
    ("leaf_result", "accounts"), ("route", "accounts"), ("pop_done", "accounts"), ("route", ""),
    ("push", "payments"), ("route", "payments"), ("leaf_pending", "payments"),
    ("gate_pause", "payments"),
    # ---- serialised here, loaded by a new machine, approved ----
    ("gate_approve", "payments"), ("leaf_result", "payments"), ("route", "payments"),
    ("pop_done", "payments"), ("route", ""), ("finish", ""),
]


def test_multi_level_run_with_back_gate_and_resume() -> None:
    machine = make_machine(SCENARIO)
    state = machine.start("open a savings account, then send Asha 500", run_id="run-s")
    machine.run(state)
    assert state.status is RunStatus.PAUSED
    saved = state.to_json()

    resumed = RunState.from_json(saved)
    assert resumed.to_dict() == json.loads(saved)
    machine2 = make_machine(SCENARIO, clock=counting_clock(9_000.0))
    assert resumed.pending is not None
    machine2.approve(resumed, resumed.pending.digest)
    machine2.run(resumed)

    assert resumed.status is RunStatus.DONE
    assert events(resumed) == SCENARIO_EVENTS
    assert resumed.result == [
        {"path": "accounts", "output": [
            {"path": "accounts/open_account", "arguments": {"kind": "savings"},
             "result": {"account": "savings-1"}}]},
        {"path": "payments", "output": [
            {"path": "payments/send_money", "arguments": {"payee": "Asha", "amount": 500},
             "result": {"sent": 500, "to": "Asha"}}]},
    ]
    assert [c["call_id"] for c in resumed.calls] == ["run-s:0", "run-s:1"]

    uninterrupted = make_machine(SCENARIO)
    reference = uninterrupted.start("open a savings account, then send Asha 500",
                                    run_id="run-s")
    drive(uninterrupted, reference)
    assert comparable(resumed) == comparable(reference)
    assert resumed.trace[-1].time_unix != reference.trace[-1].time_unix  # times do differ


def test_state_round_trips_at_every_transition_of_the_scenario() -> None:
    machine = make_machine(SCENARIO)
    state = machine.start("x", run_id="run-s")
    while True:
        text = state.to_json()
        loaded = RunState.from_json(text)
        assert loaded.to_dict() == state.to_dict()
        assert loaded.to_json() == text
        if state.status.is_final:
            break
        drive(machine, state, max_transitions=1)


def test_unknown_state_version_is_refused() -> None:
    import pytest

    machine = make_machine(["DONE"])
    data = machine.start("x", run_id="r").to_dict()
    data["version"] = 99
    with pytest.raises(ValueError, match="state version 99 is not 1"):
        RunState.from_dict(data)


# -- random trees, random (deterministic) routers ---------------------------------------------
PARAMETER_KINDS: list[dict[str, Any] | None] = [
    None,
    {"type": "object", "properties": {}},
    {"type": "object", "properties": {"s": {"type": "string"}}, "required": ["s"]},
    {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 9},
                                      "flag": {"type": "boolean"}}, "required": ["n"]},
    {"type": "object", "properties": {"k": {"enum": ["a", "b", "c"]}}, "required": ["k"],
     "additionalProperties": False},
]


@st.composite
def catalogs(draw: st.DrawFn) -> dict[str, Any]:
    def node(name: str, depth: int) -> dict[str, Any]:
        if depth == 0 or (depth < 3 and draw(st.integers(0, depth)) == 0):
            n = draw(st.integers(1, 4))
            return {"name": name, "description": f"Router {name}.",
                    "children": [node(f"n{depth + 1}_{i}", depth + 1) for i in range(n)]}
        out: dict[str, Any] = {"name": name, "description": f"Leaf {name}."}
        parameters = draw(st.sampled_from(PARAMETER_KINDS))
        if parameters is not None:
            out["parameters"] = parameters
        if draw(st.integers(0, 3)) == 0:
            out["sensitive"] = True
        if draw(st.integers(0, 4)) == 0:
            out["handler"] = "handler_fixtures:odd_result" if parameters is None else None
            if out["handler"] is None:
                del out["handler"]
        return out

    return node("root", 0)


def _hash(*parts: Any) -> int:
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:8], "big")


def _arguments(schema: dict[str, Any] | None, h: int) -> dict[str, Any]:
    if schema is None:
        return {}
    out: dict[str, Any] = {}
    for i, (name, prop) in enumerate(schema.get("properties", {}).items()):
        bit = (h >> i) & 1
        if name not in schema.get("required", []) and bit:
            continue
        if "enum" in prop:
            out[name] = prop["enum"][h % len(prop["enum"])]
        elif prop["type"] == "string":
            out[name] = f"v{h % 7}"
        elif prop["type"] == "integer":
            out[name] = prop["minimum"] + h % (prop["maximum"] - prop["minimum"] + 1)
        else:
            out[name] = bool(bit)
    return out


def seeded_script(seed: int) -> Any:
    """The router's answer as a pure function of the request: a seeded hash of (step, path)."""

    def script(request: RoutingRequest) -> ScriptStep:
        h = _hash(seed, request.step, request.node.path_str)
        roll = h % 20
        if roll == 0:
            return "not-an-option"
        if roll == 1:  # a completion state the menu may not offer
            return "BACK" if "DONE" in request.menu.options else "DONE"
        children, states = request.menu.children, [s.value for s in request.menu.states]
        if roll < 6 or not children:  # a completion state, a quarter of the time
            choice = states[(h // 20) % len(states)]
        else:
            choice = children[(h // 20) % len(children)]
        child = request.node.child(choice)
        if child is not None and child.is_leaf:
            if roll == 2:
                return (choice, {"unexpected": True})  # usually invalid
            return (choice, _arguments(dict(child.parameters or {}) or None, h // 400))
        return choice

    return script


def new_machine(tree: CapabilityTree, seed: int, limits: Limits, clock_start: float,
                router: Any = None) -> StackMachine:
    return StackMachine(tree, router or ScriptedRouter(seeded_script(seed)),
                        executor=LocalExecutor(HandlerTable(allowed_modules=["handler_fixtures"])),
                        limits=limits, clock=counting_clock(clock_start))


def gate_policy(seed: int) -> Any:
    def approve(pending: PendingCall) -> bool:
        return _hash(seed, pending.call_id) % 3 != 0

    return approve


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=catalogs(), seed=st.integers(0, 2**32), max_steps=st.integers(4, 24),
       max_iterations=st.integers(2, 6), max_depth=st.integers(2, 4),
       max_branch_switches=st.integers(1, 3))
def test_resume_from_any_transition_equals_the_uninterrupted_run(
        doc: dict[str, Any], seed: int, max_steps: int, max_iterations: int, max_depth: int,
        max_branch_switches: int) -> None:
    tree = build_tree(doc)
    limits = Limits(max_steps=max_steps, max_iterations=max_iterations, max_depth=max_depth,
                    max_branch_switches=max_branch_switches)
    gate = gate_policy(seed)

    recorder = RecordingRouter(ScriptedRouter(seeded_script(seed)))
    machine = new_machine(tree, seed, limits, 0.0, router=recorder)
    reference = machine.start("a random task", run_id="prop-run")
    snapshots = [reference.to_json()]
    while not reference.status.is_final:
        drive(machine, reference, gate=gate, max_transitions=1)
        text = reference.to_json()
        assert RunState.from_json(text).to_dict() == json.loads(text)
        snapshots.append(text)
    check_prefix_discipline(reference, recorder.prompts)
    expected = comparable(reference)

    for k, text in enumerate(snapshots):
        resumed = RunState.from_json(text)
        drive(new_machine(tree, seed, limits, 1e6 + k), resumed, gate=gate)
        assert comparable(resumed) == expected, f"resumed after transition {k}"
        assert (resumed.status, resumed.result, resumed.calls) == (
            reference.status, reference.result, reference.calls)
        assert (resumed.num_steps, resumed.num_calls, resumed.num_format_failures) == (
            reference.num_steps, reference.num_calls, reference.num_format_failures)


def test_the_property_runs_reach_gates_and_resume_paused() -> None:
    """The generated runs do exercise what the property claims: pauses, approvals, rejects."""
    doc = {"name": "root", "description": "", "children": [
        {"name": "a", "description": "", "children": [
            {"name": "pay", "description": "", "sensitive": True,
             "parameters": PARAMETER_KINDS[2]},
            {"name": "look", "description": ""}]},
        {"name": "b", "description": "", "sensitive": True}]}
    tree = build_tree(doc)
    limits = Limits(max_steps=20)
    kinds: set[str] = set()
    paused_snapshots = 0
    for seed in range(40):
        machine = new_machine(tree, seed, limits, 0.0)
        state = machine.start("t", run_id="prop-run")
        while not state.status.is_final:
            drive(machine, state, gate=gate_policy(seed), max_transitions=1)
            if state.status is RunStatus.PAUSED:
                paused_snapshots += 1
                resumed = RunState.from_json(state.to_json())
                drive(new_machine(tree, seed, limits, 5.0), resumed, gate=gate_policy(seed))
                reference = RunState.from_json(state.to_json())
                drive(machine, reference, gate=gate_policy(seed))
                assert comparable(resumed) == comparable(reference)
        kinds.update(e.kind.value for e in state.trace)
    assert paused_snapshots > 5
    assert {"gate_pause", "gate_approve", "gate_reject", "misstep", "pop_back", "pop_done",
            "limit"} <= kinds
