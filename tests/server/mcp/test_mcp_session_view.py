"""What an MCP client reads of a routed request that waits at a gate: the call, and the values
the model wrote instead of taking them from the request (none listed where it took all); of
one that waits for values the request did not give: which, their schema, and how to answer
(and which of them an elicitation form can ask)."""

from __future__ import annotations

import doctest

from stackroute.runtime.catalog import build_tree
from stackroute.runtime.decision import Decision
from stackroute.runtime.governance import RunStatus
from stackroute.runtime.machine import StackMachine
from stackroute.runtime.missing_values import values_schema
from stackroute.runtime.router import RoutingRequest
from stackroute.server.mcp import elicit_values
from stackroute.server.mcp.elicit_values import requested_schema
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


class AskingRouter:
    """Takes the payee from the request and asks for the amount."""

    def route(self, request: RoutingRequest) -> Decision:
        return Decision(choice="send_money", arguments={"payee": "Asha"},
                        missing_values=("amount",))


def test_a_call_waiting_for_values_says_what_is_missing_and_how_to_answer() -> None:
    machine = StackMachine(TREE, AskingRouter())
    state = machine.run(machine.start("send money to Asha", run_id="r"))
    assert state.status is RunStatus.PAUSED
    asked = values_schema(TREE.node("send_money").parameters, ("amount",))
    view = session_view("r", state, asked=asked)
    assert view["pending"] == {"path": "send_money", "arguments": {"payee": "Asha"},
                               "missing_values": ["amount"], "values_schema": {
                                   "type": "object", "properties": {"amount": {"type": "number"}},
                                   "required": ["amount"], "additionalProperties": False}}
    message = str(view["message"])
    assert "amount" in message and "`supply_values`" in message and "approval" not in message


def test_the_elicitation_form_holds_only_primitive_values() -> None:
    assert requested_schema({"type": "object", "required": ["card"], "properties": {
        "card": {"type": "string", "enum": ["debit", "credit"], "description": "which"}}}) == {
        "type": "object", "required": ["card"], "properties": {
            "card": {"type": "string", "enum": ["debit", "credit"], "description": "which"}}}
    # a pattern a form cannot carry is left to the leaf's schema, checked on supply
    assert requested_schema({"properties": {"month": {
        "type": "string", "pattern": "^[0-9]{4}$"}}, "required": ["month"]}) == {
        "type": "object", "properties": {"month": {"type": "string"}}, "required": ["month"]}
    for value in ({"type": "array", "items": {"type": "string"}}, {"type": "object"}, {},
                  {"type": ["string", "null"]}, {"enum": [1, 2]},
                  {"anyOf": [{"type": "string"}, {"type": "number"}]}):
        assert requested_schema({"properties": {"x": value}, "required": ["x"]}) is None, value


def test_elicit_values_doctests() -> None:
    result = doctest.testmod(elicit_values)
    assert result.attempted > 0 and result.failed == 0


class DecliningRouter:
    """Stops at its first leaf as the abstention check does: DONE at the root, recorded."""

    def route(self, request: RoutingRequest) -> Decision:
        return Decision(choice="DONE", detail={"abstention": {
            "leaf": "send_money", "fit": -3.5, "threshold": -1.25, "abstain": True}})


def test_a_request_the_check_declined_says_which_tool_did_not_fit() -> None:
    machine = StackMachine(TREE, DecliningRouter())
    state = machine.run(machine.start("open a savings account", run_id="r"))
    view = session_view("r", state)
    assert view["status"] == "done" and view["calls"] == []
    assert view["declined"] == {"path": "send_money", "fit": -3.5, "threshold": -1.25}
    assert "send_money" in view["message"] and "no call" in view["message"]
    assert "declined" not in paused_view(())


class DoneRouter:
    """Finds nothing to call: DONE at the root, no check involved."""

    def route(self, request: RoutingRequest) -> Decision:
        return Decision(choice="DONE")


def test_a_request_routed_to_no_tool_says_so() -> None:
    """A run that ends with no call and no check's stop still tells the agent why its answer
    is empty: the router found no tool for the request."""
    machine = StackMachine(TREE, DoneRouter())
    state = machine.run(machine.start("what a lovely day", run_id="r"))
    view = session_view("r", state)
    assert view["status"] == "done" and view["calls"] == [] and "declined" not in view
    assert view["message"] == "no call: routing found no tool for the request"
