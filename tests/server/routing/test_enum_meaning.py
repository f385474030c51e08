"""Enum values the request says in other words (`ValueMeaning.enum_value`, the real offline
MiniLM): "my phone got robbed" is `stolen`, "booked it twice by mistake" `duplicate_booking`.
Held-out desks (telecom, logistics, an insurer) left these to the first enum value (the
embedded default) or out (an optional one)."""

from __future__ import annotations

from typing import Any

import pytest
from doubles import LogitEngine, then_done
from stackroute.runtime.catalog import build_tree
from stackroute.server.routing.arguments.meaning import ValueMeaning
from stackroute.server.routing.options import ArgumentValues, DraftSource, RouterOptions
from stackroute.server.routing.router import build_machine, default_embedder
from stackroute.server.tools.evaluate import Query, run_query

MEANING = ValueMeaning(default_embedder)


@pytest.mark.parametrize(("values", "request_text", "value"), [
    (["lost", "stolen", "damaged", "upgrade"],
     "my phone got robbed on the bus on March 3rd 2027!! pls block it asap", "stolen"),
    (["customer_request", "duplicate_booking", "goods_not_ready", "rate_dispute", "other"],
     "Please cancel SHP-118206, sales booked it twice by mistake.", "duplicate_booking"),
    (["new_business", "renewal", "claim"], "MVR 5yr lookback: Priya Shah, new biz",
     "new_business"),
    (["walk", "run", "jump"], 'Control the exoskeleton "p6qfRfo8" to perform a running movement',
     "run"),
    (["no_signal", "dropped_calls", "slow_data", "no_internet"],
     "calls keep droping at my house since 14 March 2027", "dropped_calls"),
])
def test_an_enum_value_the_request_says_in_other_words_is_found(
        values: list[str], request_text: str, value: str) -> None:
    assert MEANING.enum_value(values, request_text) == value


@pytest.mark.parametrize(("values", "request_text"), [
    (["am", "pm", "all_day"], "Book a fibre install for ACC-58800213 on May 5th 2027"),
    (["lost", "stolen", "damaged", "upgrade"], "esim swap for 00353 85 220 9917 please"),
    (["standard", "rush", "same_day"], "release SO-730118 for picking at WH-ATL2"),
    # two values about as near: none is clearly meant
    (["scheduled", "provider_unavailable", "patient_request", "weather"],
     "Dr. Okafor is out sick today, so cancel appointment APT-771455 and text the patient"),
])
def test_no_enum_value_where_the_request_means_none_clearly(values: list[str],
                                                            request_text: str) -> None:
    assert MEANING.enum_value(values, request_text) is None


BLOCK = {"name": "r", "children": [{
    "name": "block_device", "description": "Block a lost or stolen handset by its IMEI.",
    "parameters": {"type": "object", "required": ["imei", "reason"], "properties": {
        "imei": {"type": "string", "pattern": "^[0-9]{15}$"},
        "reason": {"type": "string", "enum": ["lost", "stolen", "damaged"]},
        "handset": {"type": "string", "enum": ["mobile", "tablet"]}}}}]}


@pytest.mark.parametrize("values", [ArgumentValues.PRIORS, ArgumentValues.MODEL])
def test_the_call_takes_the_enum_value_the_request_means(values: ArgumentValues) -> None:
    engine = LogitEngine(then_done({"block_device": 5.0}))
    options = RouterOptions(recovery=None, speculation=DraftSource.OFF, argument_values=values)
    state = run_query(build_machine(build_tree(BLOCK), engine, options=options),
                      Query(id="q", query="my phone got robbed, imei is 356938035643809",
                            gold=(), args=None, tags=()))
    arguments: dict[str, Any] = state.calls[0]["arguments"]
    # an optional enum stays out where the request says its value only by meaning ("my
    # phone" is by meaning the `handset` mobile, which the request does not say)
    assert arguments == {"imei": "356938035643809", "reason": "stolen"}


@pytest.mark.parametrize(("values", "request_text", "meant"), [
    # a held-out city desk: "a fridge" among bulky items, not "sitting" for a chair (0.18
    # nearer a chair than a sofa: no value is clearly meant there)
    (["mattress", "sofa", "chair", "refrigerator", "freezer", "washer", "other"],
     "an old mattress and a fridge sitting at 88 Crescent Rd", {"refrigerator": "fridge"}),
    (["sms", "email", "push"], "outage alerts by text and email", {"sms": "text"}),
    (["storage", "results", "custody"], "S-204518 where is it stored + results",
     {"storage": "stored"}),
])
def test_list_items_the_request_says_in_other_words_are_found(
        values: list[str], request_text: str, meant: dict[str, str]) -> None:
    found = MEANING.meant_values(values, request_text)
    assert {v: g for v, g in found.items() if v in meant} == meant
    assert not set(found) - set(meant) - {v for v in values if v in request_text}


ALERTS = {"name": "r", "children": [{
    "name": "subscribe_alerts", "description": "Sign an account up for outage alerts.",
    "parameters": {"type": "object", "required": ["account"], "properties": {
        "account": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{4}$"},
        "channels": {"type": "array", "items": {"type": "string",
                                                "enum": ["sms", "email", "push", "voice"]}},
        "areas": {"type": "array", "items": {"type": "string",
                                             "enum": ["north", "south", "downtown"]}}}}}]}


@pytest.mark.parametrize(("text", "arguments"), [
    # the list the request's words start takes the items it says in other words, in its order
    ("Sign 3817-4402 up for outage alerts by text and email",
     {"account": "3817-4402", "channels": ["sms", "email"]}),
    ("Sign 3817-4402 up for outage alerts by email", {"account": "3817-4402",
                                                      "channels": ["email"]}),
    # an optional list no word of the request starts stays out, meant items or not
    ("Sign 3817-4402 up for outage alerts by text", {"account": "3817-4402"}),
])
def test_a_list_takes_the_items_the_request_says_in_other_words(
        text: str, arguments: dict[str, Any]) -> None:
    engine = LogitEngine(then_done({"subscribe_alerts": 5.0}))
    options = RouterOptions(recovery=None, speculation=DraftSource.OFF,
                            argument_values=ArgumentValues.PRIORS)
    state = run_query(build_machine(build_tree(ALERTS), engine, options=options),
                      Query(id="q", query=text, gold=(), args=None, tags=()))
    assert state.calls[0]["arguments"] == arguments
