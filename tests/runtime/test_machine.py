"""The stack machine against a scripted router, asserting on the trace (tier b)."""

from __future__ import annotations

from typing import Any

import pytest
from machine_kit import (
    bank_handlers,
    bank_tree,
    drive,
    events,
    make_machine,
    route_menus,
)
from stackroute.runtime.decision import Decision
from stackroute.runtime.frames import RefusedArguments
from stackroute.runtime.governance import RunStatus
from stackroute.runtime.machine import StackMachine
from stackroute.runtime.router import RoutingRequest, ScriptedRouter
from stackroute.runtime.state import RunState
from stackroute.runtime.usage import Usage

ROOT_MENU = ("payments", "accounts", "weather", "DONE")
TWO_STEP = ["payments", "balance", "DONE", "accounts", ("open_account", {"kind": "savings"}),
            "DONE", "DONE"]
BALANCE = {"path": "payments/balance", "arguments": {}, "result": {"balance": 120}}
SAVINGS = {"path": "accounts/open_account", "arguments": {"kind": "savings"},
           "result": {"account": "savings-1"}}


def frames(state: Any) -> list[tuple[str, int, int | None, int]]:
    """The trace as (kind, frame id, parent id, depth)."""
    return [(e.kind.value, e.frame_id, e.parent_id, e.depth) for e in state.trace]


def test_two_step_workflow_trace_and_accumulators() -> None:
    machine = make_machine(TWO_STEP)
    state = machine.start("check my balance, then open a savings account", run_id="run-1")
    assert [(f.frame_id, f.node_path) for f in state.stack] == [(0, "")]

    drive(machine, state, max_transitions=3)  # payments, balance, run balance
    assert [(f.frame_id, f.node_path) for f in state.stack] == [(0, ""), (1, "payments")]
    assert state.top().accumulator == [BALANCE]
    assert state.stack[0].accumulator == []

    drive(machine, state, max_transitions=1)  # payments: DONE, pop
    assert [f.node_path for f in state.stack] == [""]
    assert state.top().accumulator == [{"path": "payments", "output": [BALANCE]}]

    drive(machine, state)
    assert state.status is RunStatus.DONE
    assert frames(state) == [
        ("start", 0, None, 0), ("route", 0, None, 0), ("push", 1, 0, 1), ("route", 1, 0, 1),
        ("leaf_pending", 1, 0, 1), ("leaf_result", 1, 0, 1), ("route", 1, 0, 1),
        ("pop_done", 1, 0, 1), ("route", 0, None, 0), ("push", 2, 0, 1), ("route", 2, 0, 1),
        ("leaf_pending", 2, 0, 1), ("leaf_result", 2, 0, 1), ("route", 2, 0, 1),
        ("pop_done", 2, 0, 1), ("route", 0, None, 0), ("finish", 0, None, 0)]
    assert [e.decision for e in state.trace if e.kind.value == "route"] == [
        "payments", "balance", "DONE", "accounts", "open_account", "DONE", "DONE"]
    pops = [e.detail["output"] for e in state.trace if e.kind.value == "pop_done"]
    assert pops == [[BALANCE], [SAVINGS]]
    assert state.result == [{"path": "payments", "output": [BALANCE]},
                            {"path": "accounts", "output": [SAVINGS]}]
    assert state.calls == [{**BALANCE, "call_id": "run-1:0"}, {**SAVINGS, "call_id": "run-1:1"}]
    assert (state.num_steps, state.num_calls, state.num_format_failures) == (7, 2, 0)
    assert state.trace[-1].detail == {"status": "done", "num_calls": 2}
    assert [e.seq for e in state.trace] == list(range(len(state.trace)))


def test_nested_push_pop_is_lifo() -> None:
    machine = make_machine(["accounts", "statements", ("monthly", {"month": 3}), "DONE", "DONE",
                            "DONE"])
    state = machine.start("March statement", run_id="r")
    drive(machine, state)
    assert [(k, p) for k, p in events(state) if k in ("push", "pop_done", "pop_back")] == [
        ("push", "accounts"), ("push", "accounts/statements"),
        ("pop_done", "accounts/statements"), ("pop_done", "accounts")]
    assert frames(state)[:4] == [("start", 0, None, 0), ("route", 0, None, 0),
                                 ("push", 1, 0, 1), ("route", 1, 0, 1)]
    assert [(e.frame_id, e.parent_id, e.depth) for e in state.trace
            if e.path == "accounts/statements" and e.kind.value == "push"] == [(2, 1, 2)]
    monthly = {"path": "accounts/statements/monthly", "arguments": {"month": 3},
               "result": {"month": 3, "lines": 3}}
    assert state.result == [{"path": "accounts", "output": [
        {"path": "accounts/statements", "output": [monthly]}]}]


def test_menus_offer_only_meaningful_completion_states() -> None:
    machine = make_machine([
        "payments", "BACK",            # fresh non-root frame: children + BACK
        "accounts", "statements", "BACK",  # a branch left with BACK is not offered again
        ("open_account", {"kind": "checking"}),
        "DONE",                        # after output: children + DONE
        "weather",  # root leaf: {"city": ...} is missing, a misstep: the menu stays the same
        ("weather", {"city": "Oslo"}),
        "DONE",
    ])
    state = machine.start("open a checking account and tell me the weather", run_id="r")
    drive(machine, state)
    assert state.status is RunStatus.DONE
    assert route_menus(state) == [
        ("", ROOT_MENU, "payments"),
        ("payments", ("send_money", "balance", "BACK"), "BACK"),
        ("", ("accounts", "weather", "DONE"), "accounts"),
        ("accounts", ("open_account", "statements", "BACK"), "statements"),
        ("accounts/statements", ("monthly", "BACK"), "BACK"),
        ("accounts", ("open_account", "BACK"), "open_account"),
        ("accounts", ("open_account", "DONE"), "DONE"),
        ("", ("accounts", "weather", "DONE"), "weather"),
        ("", ("accounts", "weather", "DONE"), "weather"),
        ("", ("accounts", "weather", "DONE"), "DONE"),
    ]
    assert [(k, p) for k, p in events(state) if k.startswith("pop")] == [
        ("pop_back", "payments"), ("pop_back", "accounts/statements"),
        ("pop_done", "accounts")]
    assert state.num_format_failures == 1
    assert state.stack[0].tried == ["payments"]
    assert state.stack[0].history == ["payments", "accounts", "weather", "weather", "DONE"]


def test_tried_branches_stay_on_the_menu_when_not_excluded() -> None:
    from stackroute.runtime.governance import Limits

    machine = make_machine(["payments", "BACK", "DONE"], limits=Limits(exclude_tried=False))
    state = machine.start("nothing", run_id="r")
    drive(machine, state)
    assert [menu for _, menu, _ in route_menus(state)] == [ROOT_MENU, (
        "send_money", "balance", "BACK"), ROOT_MENU]
    assert state.result == []


@pytest.mark.parametrize(("script", "error", "kind"), [
    (["BACK"], "'BACK' is not one of ['payments', 'accounts', 'weather', 'DONE']", "menu"),
    (["send_money"], "'send_money' is not one of ['payments', 'accounts', 'weather', 'DONE']",
     "menu"),
    (["payments", "DONE"], "'DONE' is not one of ['send_money', 'balance', 'BACK']", "menu"),
    (["payments", "payments"], "'payments' is not one of ['send_money', 'balance', 'BACK']",
     "menu"),
    (["payments", "back"], "'back' is not one of ['send_money', 'balance', 'BACK']", "menu"),
    (["accounts", ("open_account", {"kind": "gold"})],
     "arguments of open_account do not match its schema: kind: 'gold' is not one of "
     "['savings', 'checking']", "arguments"),
    (["accounts", ("open_account", {})],
     "arguments of open_account do not match its schema: (top): 'kind' is a required property",
     "arguments"),
    (["payments", ("balance", {"x": 1})],
     "arguments of balance do not match its schema: takes no arguments, got ['x']",
     "arguments"),
    (["payments", ("send_money", {"payee": "A", "amount": "ten", "memo": 1})],
     "arguments of send_money do not match its schema: amount: 'ten' is not of type 'number'; "
     "(top): Additional properties are not allowed ('memo' was unexpected)", "arguments"),
])
def test_missteps_are_recorded_and_counted(script: list[Any], error: str, kind: str) -> None:
    machine = make_machine(script)
    state = machine.start("x", run_id="r")
    for _ in script:
        machine.step(state)
    last = state.trace[-1]
    assert (last.kind.value, last.error, dict(last.detail)) == ("misstep", error, {"kind": kind})
    assert state.num_format_failures == 1
    assert state.num_steps == len(script)
    assert state.pending is None and state.calls == []
    assert state.status is RunStatus.RUNNING
    assert "leaf_pending" not in [k for k, _ in events(state)]


def test_missteps_repeat_until_max_iterations_pops_the_frame() -> None:
    from stackroute.runtime.governance import Limits

    machine = make_machine(["payments", "nope", "nope", "nope", "DONE"],
                           limits=Limits(max_iterations=3))
    state = machine.start("x", run_id="r")
    drive(machine, state)
    assert state.num_format_failures == 3
    kinds = [k for k, _ in events(state)]
    # The frame produced nothing, so the forced pop is a BACK (no empty output for the parent).
    assert kinds == ["start", "route", "push", "route", "misstep", "route", "misstep", "route",
                     "misstep", "limit", "pop_back", "route", "finish"]
    assert state.trace[9].detail == {"limit": "max_iterations", "value": 3}
    assert state.result == []


def test_raw_text_of_an_unconstrained_answer_is_what_is_recorded() -> None:
    class Chatty:
        def route(self, request: RoutingRequest) -> Decision:
            if request.step == 0:
                return Decision(choice="payments please", raw_text="I'd say payments please")
            return Decision(choice="DONE")

    machine = make_machine(Chatty())
    state = machine.start("x", run_id="r")
    drive(machine, state)
    assert state.trace[2].error == ("'payments please' is not one of ['payments', 'accounts', "
                                    "'weather', 'DONE']")
    assert machine.layout.routing_prompt(state).messages[-2].content == (
        "I'd say payments please")


def test_probabilities_and_usage_are_recorded() -> None:
    class Confident:
        def route(self, request: RoutingRequest) -> Decision:
            options = request.menu.options
            choice = "DONE"
            probs = {o: (0.9 if o == choice else 0.1 / (len(options) - 1)) for o in options}
            return Decision(choice=choice, probabilities=probs, margin=2.2,
                            usage=Usage(model_calls=1, prompt_tokens=100, prefill_tokens=30,
                                        cached_tokens=70, generated_tokens=1,
                                        forward_passes=1, latency_ms=12.5),
                            detail={"engine": "fake"})

    machine = make_machine(Confident())
    state = machine.start("nothing to do", run_id="r")
    drive(machine, state)
    route = state.trace[1]
    assert route.probabilities is not None and route.probabilities["DONE"] == 0.9
    assert route.usage is not None and route.usage["cached_tokens"] == 70
    assert route.detail == {"engine": "fake"}
    assert state.usage.model_calls == 1 and state.usage.latency_ms == 12.5
    assert state.result == []


# -- confirmation gates ---------------------------------------------------------------------
SEND = ("send_money", {"payee": "Asha", "amount": 500})


def paused_machine(after: list[Any]) -> tuple[StackMachine, Any, list[tuple[str, Any]]]:
    log: list[tuple[str, Any]] = []
    handlers = bank_handlers()
    handlers.bind("payments/send_money",
                  lambda payee, amount: log.append((payee, amount)) or {"sent": amount})
    machine = make_machine(["payments", SEND, *after], handlers=handlers)
    state = machine.start("send 500 to Asha", run_id="run-g")
    drive(machine, state, max_transitions=2)
    return machine, state, log


def test_sensitive_leaf_pauses_bound_to_the_exact_call() -> None:
    from stackroute.runtime.errors import StateError
    from stackroute.runtime.state import arguments_digest

    machine, state, log = paused_machine(["DONE", "DONE"])
    assert state.status is RunStatus.PAUSED
    pending = state.pending
    assert pending is not None and pending.is_gated
    assert (pending.path, pending.arguments, pending.call_id) == (
        "payments/send_money", {"payee": "Asha", "amount": 500}, "run-g:0")
    digest = pending.digest
    assert len(digest) == 32 and digest != arguments_digest("payments/send_money",
                                                            {"payee": "Asha", "amount": 500})
    assert events(state)[-2:] == [("leaf_pending", "payments"), ("gate_pause", "payments")]
    assert state.trace[-1].detail == {"leaf": "payments/send_money", "call_id": "run-g:0",
                                      "digest": digest}
    with pytest.raises(StateError, match="run-g is paused, not running"):
        machine.step(state)

    before = state.to_dict()
    wrong = [arguments_digest("payments/send_money", {"payee": "Asha", "amount": 5000}),
             arguments_digest("payments/balance", {"payee": "Asha", "amount": 500}),
             "", digest.upper()]
    for bad in wrong:
        with pytest.raises(StateError, match="confirmation is for another call"):
            machine.approve(state, bad)
        with pytest.raises(StateError, match="confirmation is for another call"):
            machine.reject(state, bad)
        assert state.to_dict() == before
    assert log == []

    machine.approve(state, digest)
    assert state.status is RunStatus.RUNNING
    assert events(state)[-1] == ("gate_approve", "payments")
    assert log == []
    with pytest.raises(StateError, match="not waiting at a confirmation gate"):
        machine.approve(state, digest)
    drive(machine, state)
    assert log == [("Asha", 500)]
    assert state.status is RunStatus.DONE
    assert state.calls == [{"path": "payments/send_money", "arguments": SEND[1],
                            "result": {"sent": 500}, "call_id": "run-g:0"}]


def test_reject_records_and_continues() -> None:
    machine, state, log = paused_machine(["DONE", "DONE"])
    assert state.pending is not None
    machine.reject(state, state.pending.digest)
    assert state.status is RunStatus.RUNNING and state.pending is None
    assert events(state)[-1] == ("gate_reject", "payments")
    rejected = {"path": "payments/send_money", "arguments": SEND[1], "rejected": True}
    assert state.top().accumulator == [rejected]
    drive(machine, state)
    assert log == [] and state.calls == []
    assert route_menus(state)[-2] == ("payments", ("send_money", "balance", "DONE"), "DONE")
    assert state.result == [{"path": "payments", "output": [rejected]}]
    assert state.status is RunStatus.DONE


# -- limits ---------------------------------------------------------------------------------
def test_max_steps_ends_the_run_with_limit() -> None:
    from stackroute.runtime.governance import Limits

    machine = make_machine(["payments", "balance", "balance", "balance"],
                           limits=Limits(max_steps=3))
    state = machine.start("x", run_id="r")
    drive(machine, state)
    assert state.status is RunStatus.LIMIT
    assert events(state)[-2:] == [("limit", "payments"), ("finish", "payments")]
    assert state.trace[-2].detail == {"limit": "max_steps", "value": 3}
    assert state.trace[-1].detail == {"status": "limit", "num_calls": 2}
    assert state.num_steps == 3 and len(state.calls) == 2


def test_max_iterations_forces_a_pop_with_the_output_so_far() -> None:
    from stackroute.runtime.governance import Limits

    machine = make_machine(["payments", "balance", "balance", "DONE"],
                           limits=Limits(max_iterations=2))
    state = machine.start("x", run_id="r")
    drive(machine, state)
    assert [k for k, _ in events(state)] == [
        "start", "route", "push", "route", "leaf_pending", "leaf_result", "route",
        "leaf_pending", "leaf_result", "limit", "pop_done", "route", "finish"]
    assert state.trace[9].detail == {"limit": "max_iterations", "value": 2}
    assert state.status is RunStatus.DONE
    assert state.result == [{"path": "payments", "output": [BALANCE, BALANCE]}]


def test_max_iterations_at_the_root_ends_the_run() -> None:
    from stackroute.runtime.governance import Limits

    machine = make_machine([("weather", {"city": "Oslo"}), ("weather", {"city": "Rome"})],
                           limits=Limits(max_iterations=2))
    state = machine.start("x", run_id="r")
    drive(machine, state)
    assert state.status is RunStatus.LIMIT
    assert events(state)[-2:] == [("limit", ""), ("finish", "")]
    assert [c["arguments"]["city"] for c in state.result or []] == ["Oslo", "Rome"]


def test_max_depth_refuses_delegation() -> None:
    from stackroute.runtime.governance import Limits

    machine = make_machine(["accounts", "statements", ("open_account", {"kind": "savings"}),
                            "DONE", "DONE"], limits=Limits(max_depth=2))
    state = machine.start("x", run_id="r")
    drive(machine, state)
    assert state.status is RunStatus.DONE
    limit = next(e for e in state.trace if e.kind.value == "limit")
    assert (limit.path, dict(limit.detail)) == (
        "accounts", {"limit": "max_depth", "value": 2, "child": "statements"})
    assert "accounts/statements" not in [p for _, p in events(state)]
    assert route_menus(state)[2] == ("accounts", ("open_account", "BACK"), "open_account")
    assert max(e.depth for e in state.trace) == 1


def test_branch_switching_alerts_once() -> None:
    from stackroute.runtime.governance import Limits

    script = ["payments", "balance", "DONE", "accounts", ("open_account", {"kind": "savings"}),
              "DONE"] * 2 + ["DONE"]
    machine = make_machine(script, limits=Limits(max_branch_switches=2))
    state = machine.start("x", run_id="r")
    drive(machine, state)
    alerts = [e for e in state.trace if e.kind.value == "alert"]
    assert len(alerts) == 1
    assert (alerts[0].path, dict(alerts[0].detail)) == ("", {
        "alert": "branch_switching", "switches": 2,
        "history": ["payments", "accounts", "payments"]})
    assert state.trace[alerts[0].seq - 1].kind.value == "push"
    assert state.stack[0].is_alerted
    assert state.status is RunStatus.DONE


# -- lifecycle ------------------------------------------------------------------------------
def test_cancel() -> None:
    from stackroute.runtime.errors import StateError

    machine = make_machine(TWO_STEP)
    state = machine.start("x", run_id="r")
    drive(machine, state, max_transitions=2)
    machine.cancel(state, "user closed the tab")
    assert state.status is RunStatus.CANCELLED
    assert state.trace[-1].kind.value == "cancel"
    assert state.trace[-1].detail == {"reason": "user closed the tab"}
    with pytest.raises(StateError, match="is cancelled, not running"):
        machine.step(state)
    with pytest.raises(StateError, match="already cancelled"):
        machine.cancel(state)


def test_cancel_at_a_gate_drops_the_call() -> None:
    machine, state, log = paused_machine(["DONE", "DONE"])
    machine.cancel(state)
    assert state.status is RunStatus.CANCELLED and state.pending is None
    assert state.trace[-1].detail == {"reason": "cancelled by the user"}
    assert log == []


def test_finished_runs_refuse_more_steps() -> None:
    from stackroute.runtime.errors import StateError

    machine = make_machine(["DONE"])
    state = machine.run(machine.start("x", run_id="r"))
    assert state.status is RunStatus.DONE and state.result == []
    with pytest.raises(StateError, match="is done, not running"):
        machine.step(state)
    with pytest.raises(StateError):
        machine.cancel(state)


def test_run_returns_at_a_gate() -> None:
    machine, _, _ = paused_machine([])
    state = machine.run(machine.start("again", run_id="r2"))
    assert state.status is RunStatus.PAUSED


def test_limits_are_checked() -> None:
    from stackroute.runtime.errors import InputError
    from stackroute.runtime.governance import Limits

    with pytest.raises(InputError, match="limit max_steps must be a positive integer, got 0"):
        Limits(max_steps=0)
    with pytest.raises(InputError, match=r"unknown limit\(s\) \['max_tokens'\]"):
        Limits.from_dict({"max_tokens": 3})
    assert Limits.from_dict(Limits(max_depth=3).to_dict()) == Limits(max_depth=3)


def test_scripted_router_past_its_script_raises() -> None:
    machine = StackMachine(bank_tree(), ScriptedRouter(["payments"]))
    state = machine.start("x", run_id="r")
    machine.step(state)
    with pytest.raises(IndexError, match="script has no step 1"):
        machine.step(state)


def test_start_at_an_inner_router() -> None:
    from stackroute.runtime.errors import StateError
    from stackroute.runtime.prompt import answer

    machine = make_machine([("monthly", {"month": 1}), "DONE", "DONE", "DONE"])
    state = machine.start("January statement", run_id="r", at="accounts/statements")
    assert [f.node_path for f in state.stack] == ["", "accounts", "accounts/statements"]
    assert events(state) == [("start", ""), ("push", "accounts"),
                             ("push", "accounts/statements")]
    assert state.stack[0].turns[-1] == answer("accounts")
    assert state.stack[1].turns[-1] == answer("statements")
    drive(machine, state)
    assert state.status is RunStatus.DONE
    assert route_menus(state)[0] == ("accounts/statements", ("monthly", "BACK"), "monthly")
    for bad, message in [("accounts/open_account", "is a leaf"),
                         ("nope/nothing", "no node at path 'nope/nothing' in catalog 'bank'")]:
        with pytest.raises(StateError, match=message):
            machine.start("x", at=bad)


def test_a_confirmation_digest_approves_one_call_only() -> None:
    """Issue 15.1: the digest that approved one `send_money(500, Asha)` must not approve the
    next identical call (same run, or another run), and a wrong digest's error never shows
    the expected one."""
    from stackroute.runtime.errors import StateError

    machine, first, _ = paused_machine(["DONE", "DONE"])
    assert first.pending is not None
    approved = first.pending.digest
    again = machine.start("send 500 to Asha", run_id="run-h")
    drive(machine, again, max_transitions=2)
    assert again.pending is not None and again.pending.arguments == first.pending.arguments
    assert again.pending.digest != approved
    with pytest.raises(StateError) as caught:
        machine.approve(again, approved)
    assert again.pending.digest not in str(caught.value)
    assert approved not in str(caught.value)


def test_arguments_the_router_could_not_parse_are_a_misstep_without_validation() -> None:
    """Issue 15.5: text cut off mid-JSON was once validated against the leaf's schema
    while the session lock was held; a catastrophic pattern then stalled the step
    (`^(a|a)*$` on 24 characters: over a second). Unparsed text is a misstep as it stands."""
    import time as clock

    from stackroute.runtime.decision import Decision
    from stackroute.runtime.tree import CapabilityTree, Node

    text = "a" * 24 + "!"
    schema = {"type": "object", "additionalProperties": {"type": "string",
                                                          "pattern": "^(a|a)*$"}}
    leaf = Node(name="echo", path=("echo",), description="", parameters=schema)
    tree = CapabilityTree(Node(name="r", path=(), description="", children=(leaf,)))

    class CutOff:
        def route(self, request: Any) -> Decision:
            return Decision(choice="echo", arguments=None, arguments_text=text)

    machine = StackMachine(tree, CutOff())
    state = machine.start("echo", run_id="u")
    started = clock.perf_counter()
    machine.step(state)
    assert clock.perf_counter() - started < 0.5
    [misstep] = [e for e in state.trace if e.kind.value == "misstep"]
    assert misstep.error is not None and "not a JSON object" in misstep.error
    assert state.pending is None


def test_arguments_the_schema_refused_reach_the_next_routing_call_of_that_frame() -> None:
    """A router that chooses deterministically would make the same refused call on every
    retry: the frame keeps what was refused (and which properties the schema named) and hands
    it to the router with the next call, across a save and resume."""
    seen: list[RoutingRequest] = []

    class Recording:
        def __init__(self) -> None:
            self.script = ScriptedRouter([
                "payments", ("send_money", {"payee": "A", "amount": "ten"}),
                ("send_money", {"payee": "A", "amount": 10, "memo": 1}),
                ("send_money", {"payee": "A", "amount": 10}), "DONE", "DONE"])

        def route(self, request: RoutingRequest) -> Decision:
            seen.append(request)
            return self.script.route(request)

    machine = make_machine(Recording())
    state = machine.start("x", run_id="r")
    for _ in range(3):
        machine.step(state)
        state = RunState.from_json(state.to_json())
    assert seen[1].refused == ()
    assert seen[2].refused == (
        RefusedArguments("payments/send_money", {"payee": "A", "amount": "ten"}, ("amount",)),)
    drive(machine, state)
    # an extra property is the object's problem, not one property's: no property named
    assert seen[3].refused[1] == RefusedArguments(
        "payments/send_money", {"payee": "A", "amount": 10, "memo": 1}, ())
    assert len(seen[4].refused) == 2  # kept while the frame lives
    assert [c["arguments"] for c in state.calls] == [{"payee": "A", "amount": 10}]
