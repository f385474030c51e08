"""What an MCP client reads of a routed request that waits at a gate: the call, and the values
the model wrote instead of taking them from the request (none listed where it took all)."""

from __future__ import annotations

from stackroute.runtime.catalog import build_tree
from stackroute.runtime.decision import Decision
from stackroute.runtime.governance import RunStatus
from stackroute.runtime.machine import StackMachine
from stackroute.runtime.router import RoutingRequest
from stackroute.server.mcp.gateway import session_view

TREE = build_tree({"name": "bank", "children": [
    {"name": "send_money", "description": "Send money.", "sensitive": True,
     "parameters": {"type": "object", "properties": {
         "payee": {"type": "string"}, "amount": {"type": "number"}},
         "required": ["payee", "amount"]}}]})


class Router:
    def __init__(self, written: tuple[str, ...]) -> None:
        self.written = written

    def route(self, request: RoutingRequest) -> Decision:
        return Decision(choice="send_money", arguments={"payee": "Asha", "amount": 100},
                        written_values=self.written)


def paused_view(written: tuple[str, ...]) -> dict[str, object]:
    machine = StackMachine(TREE, Router(written))
    state = machine.run(machine.start("send money to Asha", run_id="r"))
    assert state.status is RunStatus.PAUSED
    return session_view("r", state)


def test_the_paused_answer_names_the_written_values() -> None:
    assert paused_view(("amount",))["pending"] == {
        "path": "send_money", "arguments": {"payee": "Asha", "amount": 100},
        "written_values": ["amount"]}
    assert paused_view(())["pending"] == {"path": "send_money",
                                          "arguments": {"payee": "Asha", "amount": 100}}
