"""Values the request did not hold: a router that had to write a required value itself (no
candidate in the request: "send money to Asha" names no amount) says so in its decision, and
the run keeps it beside the call: on the pending call an approver reads, in the trace, in the
call record, and through a resume."""

from __future__ import annotations

from typing import Any

from machine_kit import bank_handlers, drive, make_machine
from stackroute.runtime.decision import Decision
from stackroute.runtime.governance import RunStatus
from stackroute.runtime.router import RoutingRequest
from stackroute.runtime.state import RunState
from stackroute.runtime.trace import EventKind


class WritingRouter:
    """payments → send_money with the amount written, not taken → DONE → DONE."""

    def __init__(self, written: tuple[str, ...]) -> None:
        self.written = written

    def route(self, request: RoutingRequest) -> Decision:
        choice = ["payments", "send_money", "DONE", "DONE"][request.step]
        if choice != "send_money":
            return Decision(choice=choice)
        return Decision(choice=choice, arguments={"payee": "Asha", "amount": 100},
                        written_values=self.written)


def paused(written: tuple[str, ...]) -> tuple[Any, RunState, list[Any]]:
    log: list[Any] = []
    handlers = bank_handlers()
    handlers.bind("payments/send_money",
                  lambda payee, amount: log.append((payee, amount)) or {"sent": amount})
    machine = make_machine(WritingRouter(written), handlers=handlers)  # type: ignore[arg-type]
    state = machine.start("send money to Asha", run_id="run-w")
    drive(machine, state, max_transitions=2)
    return machine, state, log


def test_the_pending_call_the_trace_and_the_call_record_name_the_written_values() -> None:
    machine, state, log = paused(("amount",))
    assert state.status is RunStatus.PAUSED and state.pending is not None
    assert state.pending.written_values == ("amount",)
    event = next(e for e in state.trace if e.kind is EventKind.LEAF_PENDING)
    assert event.detail["written_values"] == ["amount"]
    resumed = RunState.from_json(state.to_json())  # a store's round trip
    assert resumed.pending is not None and resumed.pending.written_values == ("amount",)
    drive(machine, resumed)
    assert resumed.status is RunStatus.DONE and log == [("Asha", 100)]
    assert resumed.calls == [{"path": "payments/send_money",
                              "arguments": {"payee": "Asha", "amount": 100},
                              "result": {"sent": 100}, "call_id": "run-w:0",
                              "written_values": ["amount"]}]


def test_a_call_taken_whole_from_the_request_records_nothing_more() -> None:
    _, state, _ = paused(())
    assert state.pending is not None and state.pending.written_values == ()
    assert "written_values" not in state.pending.to_dict()
    event = next(e for e in state.trace if e.kind is EventKind.LEAF_PENDING)
    assert "written_values" not in event.detail


def test_a_state_saved_before_written_values_existed_still_loads() -> None:
    _, state, _ = paused(())
    data = state.to_dict()
    assert data["pending"] is not None and "written_values" not in data["pending"]
    assert RunState.from_dict(data).pending.written_values == ()  # type: ignore[union-attr]
