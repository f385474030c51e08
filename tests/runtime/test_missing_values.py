"""A call whose required value the request lacked waits for it (`StackMachine.supply`)
instead of sending a value the model made up (tier b: a scripted router)."""

from __future__ import annotations

from typing import Any

import pytest
from machine_kit import bank_handlers, events, make_machine
from stackroute.runtime.decision import Decision
from stackroute.runtime.errors import InputError, StateError
from stackroute.runtime.governance import RunStatus
from stackroute.runtime.router import RoutingRequest
from stackroute.runtime.state import RunState


class AskingRouter:
    """Routes by `script` (step → choice); a leaf's decision takes `arguments` and asks for
    `missing`."""

    def __init__(self, script: list[str], arguments: dict[str, Any],
                 missing: tuple[str, ...]) -> None:
        self.script, self.arguments, self.missing = script, arguments, missing

    def route(self, request: RoutingRequest) -> Decision:
        choice = self.script[request.step]
        child = request.node.child(choice)
        if child is not None and child.is_leaf:
            return Decision(choice=choice, arguments=dict(self.arguments),
                            missing_values=self.missing)
        return Decision(choice=choice)


def asking(script: list[str], arguments: dict[str, Any], missing: tuple[str, ...],
           log: list[Any] | None = None) -> tuple[Any, RunState]:
    handlers = bank_handlers()
    if log is not None:
        handlers.bind("payments/send_money",
                      lambda payee, amount: log.append((payee, amount)) or {"sent": amount})
    machine = make_machine(AskingRouter(script, arguments, missing), handlers=handlers)  # type: ignore[arg-type]
    state = machine.start("send money to Asha", run_id="run-v")
    while state.status is RunStatus.RUNNING:
        machine.step(state)
    return machine, state


def test_the_call_waits_for_the_missing_value_and_runs_with_the_users() -> None:
    log: list[Any] = []
    machine, state = asking(["payments", "send_money", "DONE", "DONE"], {"payee": "Asha"},
                            ("amount",), log)
    pending = state.pending
    assert state.status is RunStatus.PAUSED and pending is not None
    assert (pending.arguments, pending.missing_values) == ({"payee": "Asha"}, ("amount",))
    assert events(state)[-2:] == [("leaf_pending", "payments"), ("values_pause", "payments")]
    assert state.trace[-1].detail["missing_values"] == ["amount"]
    with pytest.raises(StateError, match="waits for values: amount; supply them"):
        machine.approve(state, pending.digest)
    asked_digest = pending.digest

    machine.supply(state, asked_digest, {"amount": 500})
    assert log == []  # a sensitive leaf: the whole call goes to its gate now
    assert state.status is RunStatus.PAUSED and pending.is_gated
    assert pending.arguments == {"payee": "Asha", "amount": 500}
    assert (pending.missing_values, pending.supplied_values) == ((), ("amount",))
    assert pending.digest != asked_digest  # the approver confirms the whole call
    assert events(state)[-2:] == [("values_supply", "payments"), ("gate_pause", "payments")]
    assert state.top().turns[-1].content == '{"payee":"Asha","amount":500}'

    machine.approve(state, pending.digest)
    while state.status is RunStatus.RUNNING:
        machine.step(state)
    assert log == [("Asha", 500)]
    assert state.status is RunStatus.DONE
    assert state.calls[0]["supplied_values"] == ["amount"]


def test_wrong_values_are_refused_and_lose_nothing() -> None:
    machine, state = asking(["payments", "send_money"], {"payee": "Asha"}, ("amount",))
    assert state.pending is not None
    digest = state.pending.digest
    before = state.to_dict()
    cases = [({"amount": "lots"}, r"do not fit its schema: amount: 'lots' is not of type"),
             ({}, "still needs amount"),
             ({"amount": 5, "payee": "Bo"}, "waits only for amount; got payee too"),
             ([500], "must be a JSON object with amount; got list")]
    for values, message in cases:
        with pytest.raises(InputError, match=message):
            machine.supply(state, digest, values)
        assert state.to_dict() == before
    with pytest.raises(StateError, match="confirmation is for another call"):
        machine.supply(state, "0" * 32, {"amount": 5})
    assert state.to_dict() == before


def test_a_plain_leaf_runs_once_supplied_and_the_state_round_trips() -> None:
    machine, state = asking(["weather", "DONE"], {}, ("city",))
    assert state.status is RunStatus.PAUSED and state.pending is not None
    resumed = RunState.from_json(state.to_json())
    assert resumed.pending is not None and resumed.pending.missing_values == ("city",)
    machine.supply(resumed, resumed.pending.digest, {"city": "Lisbon"})
    assert resumed.status is RunStatus.RUNNING  # not sensitive: no gate
    while resumed.status is RunStatus.RUNNING:
        machine.step(resumed)
    assert resumed.calls[0]["arguments"] == {"city": "Lisbon"}
    with pytest.raises(StateError, match="not waiting at a confirmation gate or for values"):
        machine.supply(resumed, "x", {"city": "Porto"})


def test_declining_the_question_rejects_the_call() -> None:
    machine, state = asking(["weather", "DONE"], {}, ("city",))
    assert state.pending is not None
    machine.reject(state, state.pending.digest)
    assert state.pending is None and state.status is RunStatus.RUNNING
    assert state.top().accumulator[0]["rejected"] is True


def test_a_router_that_asks_for_a_given_or_unknown_value_is_a_misstep() -> None:
    _, state = asking(["weather", "DONE", "DONE", "DONE", "DONE", "DONE"],
                            {"city": "Oslo"}, ("city",))
    kinds = [e.kind.value for e in state.trace]
    assert "values_pause" not in kinds and "misstep" in kinds
    misstep = next(e for e in state.trace if e.kind.value == "misstep")
    assert "asks for city, which is not a required property or was given" in (misstep.error or "")
