"""A required value the request does not hold is asked of the user (`missing_values: ask`,
the default), not made up; `write` keeps the old fallback (scripted engines, no model)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from stackroute.runtime.catalog import build_tree
from stackroute.runtime.governance import RunStatus
from stackroute.server.routing.options import ArgumentValues, MissingValues
from stackroute.server.routing.router import build_machine, product_options
from stackroute.server.tools.evaluate import Query, run_query
from test_arguments import Writes

PAY = {"name": "r", "children": [
    {"name": "send_money", "description": "Send money to a contact",
     "parameters": {"type": "object", "properties": {
         "payee": {"type": "string"}, "amount": {"type": "number"},
         "details": {"type": "object", "properties": {"memo": {"type": "string"}}}},
         "required": ["payee", "amount"]}}]}


def routed(text: str, *, missing: MissingValues | None = None, catalog: dict[str, Any] = PAY,
           written: str = '{"amount": 100}',
           values: ArgumentValues = ArgumentValues.MODEL) -> tuple[Any, Writes]:
    engine = Writes({"send_money": 5.0, "DONE": 0.0}, text=written)
    options = replace(product_options(engine), argument_values=values)
    if missing is not None:
        options = replace(options, missing_values=missing)
    machine = build_machine(build_tree(catalog), engine, options=options)
    state = run_query(machine, Query(id="q", query=text, gold=(), args=None, tags=()))
    return state, engine


def test_a_missing_amount_is_asked_by_default_with_no_model_call() -> None:
    state, engine = routed("Send money to Asha")
    assert state.status is RunStatus.PAUSED and state.pending is not None
    assert state.pending.missing_values == ("amount",)
    assert state.pending.arguments == {"payee": "Asha"}
    assert engine.schemas == []  # nothing written


def test_write_makes_it_up_and_names_it() -> None:
    state, engine = routed("Send money to Asha", missing=MissingValues.WRITE)
    [call] = state.calls
    assert call["arguments"] == {"payee": "Asha", "amount": 100}
    assert call["written_values"] == ["amount"] and len(engine.schemas) == 1


@pytest.mark.parametrize("text", ["Send 500 dollars to Asha", "Pay Asha $500"])
def test_a_value_the_request_holds_is_never_asked(text: str) -> None:
    state, _ = routed(text)
    [call] = state.calls
    assert call["arguments"] == {"payee": "Asha", "amount": 500}
    assert "missing_values" not in call and "supplied_values" not in call


def test_a_required_object_is_written_not_asked() -> None:
    catalog = {"name": "r", "children": [{**PAY["children"][0], "parameters": {
        **PAY["children"][0]["parameters"], "required": ["payee", "amount", "details"]}}]}
    state, engine = routed("Send money to Asha", catalog=catalog,
                           written='{"details": {"memo": "rent"}}')
    assert state.pending is not None and state.pending.missing_values == ("amount",)
    assert [sorted(s["properties"]) for s in engine.schemas] == [["details"]]


def test_a_string_whose_only_candidates_are_weak_is_asked() -> None:
    # the request holds words, all of them the tool's own (log-odds below 0): asked
    catalog = {"name": "r", "children": [
        {"name": "get_weather", "description": "The weather forecast for a city",
         "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                        "required": ["city"]}}]}
    engine = Writes({"get_weather": 5.0, "DONE": 0.0})
    for values in ArgumentValues:
        options = replace(product_options(engine), argument_values=values)
        machine = build_machine(build_tree(catalog), engine, options=options)
        for text, asked in (("Show me the weather forecast", True),
                            ("Show me the weather forecast for Lisbon", False)):
            state = run_query(machine, Query(id="q", query=text, gold=(), args=None, tags=()))
            assert (state.pending is not None) is asked, (values, text, state.calls)
