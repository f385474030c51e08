"""Leaf arguments from the request (routing/arguments/filling.py through routing/router.py):
one constrained choice per value over the request's candidates, no call for a single
candidate or an empty schema, optional properties only where the request supports them, free
JSON under the schema only for a required value with no candidate (tier b: a scripted engine,
the real machine; tier a: the real embedded model on the README's command)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pytest
from doubles import LogitEngine, then_done
from stackroute.runtime.catalog import build_tree
from stackroute.runtime.frames import RefusedArguments
from stackroute.runtime.usage import Usage
from stackroute.server.engines.base import Constraint, Generation, SamplingOptions
from stackroute.server.routing.arguments.menus import ValueMenus
from stackroute.server.routing.options import MissingValues
from stackroute.server.routing.router import build_machine, product_options
from stackroute.server.tools.evaluate import Query, run_query

SCHEMA = {"type": "object", "properties": {
    "amount": {"type": "number"},
    "note": {"type": "string", "format": "email"}},
    "required": ["amount"]}
CATALOG = {"name": "r", "children": [{"name": "pay", "description": "Pay.",
                                      "parameters": SCHEMA}]}
SEND = {"name": "r", "children": [{"name": "send", "description": "Send money.",
    "parameters": {"type": "object", "properties": {
        "payee": {"type": "string", "description": "who receives it"},
        "amount": {"type": "number"},
        "currency": {"type": "string", "enum": ["USD", "EUR"]},
        "memo": {"type": "string"}},
        "required": ["payee", "amount"]},
    "examples": [{"request": "send 20 to Bo", "arguments": {"payee": "Bo", "amount": 20}}]}]}


class Writes(LogitEngine):
    """Routes to the first leaf; writes `text` for any JSON it is asked for."""

    def __init__(self, route: Mapping[str, float], text: str = "{}",
                 finish_reason: str = "stop", **logits: float) -> None:
        super().__init__(then_done({**route, **logits}))
        self.text, self.finish_reason = text, finish_reason
        self.schemas: list[Mapping[str, Any]] = []

    def generate(self, prompt: Any, *, constraint: Constraint | None = None,
                 sampling: SamplingOptions | None = None) -> Generation:
        assert constraint is not None and constraint.schema is not None
        self.schemas.append(constraint.schema)
        return Generation(text=self.text, finish_reason=self.finish_reason,
                          usage=Usage(model_calls=1, generated_tokens=5))


def leaf_event(state: Any, name: str) -> Any:
    return next(e for e in state.trace if e.kind.value == "route" and e.decision == name)


def value_calls(engine: LogitEngine) -> list[tuple[str, ...]]:
    return [c.options for c in engine.calls if "DONE" not in c.options]


def run(catalog: dict[str, Any], engine: LogitEngine, text: str,
        missing: MissingValues | None = None) -> Any:
    """`text` routed with the product's options (`missing`: the missing-values option)."""
    options = None if missing is None else replace(product_options(engine),
                                                   missing_values=missing)
    machine = build_machine(build_tree(catalog), engine, options=options)
    return run_query(machine, Query(id="q", query=text, gold=(), args=None, tags=()))


def test_a_single_candidate_takes_no_call_and_an_unsupported_option_stays_out() -> None:
    engine = Writes({"pay": 5.0, "DONE": 0.0})
    state = run(CATALOG, engine, "pay 5")
    assert [(c["path"], c["arguments"]) for c in state.calls] == [("pay", {"amount": 5})]
    assert engine.schemas == [] and value_calls(engine) == []
    assert leaf_event(state, "pay").usage["model_calls"] == 1  # the menu choice only
    assert leaf_event(state, "pay").arguments_call.usage.model_calls == 0


def test_the_model_chooses_among_the_requests_values_with_their_priors() -> None:
    engine = Writes({"send": 5.0, "DONE": 0.0})
    state = run(SEND, engine, "Send 40 euros to Asha and 10 to Li")
    (payee_options, amount_options) = value_calls(engine)[:2]
    assert payee_options[0] == "Asha" and "Li" in payee_options
    assert amount_options == ("40", "10")  # the value given to payee is not offered again
    bias = next(c.bias for c in engine.calls if c.options == payee_options)
    assert bias is not None and bias["Asha"] > bias["euros"]
    arguments = state.calls[0]["arguments"]
    assert arguments["payee"] == "Asha" and arguments["amount"] == 40
    assert arguments["currency"] == "EUR"  # "euros" matched the enum word, NONE lost
    assert "memo" not in arguments  # the request never names a memo


def test_the_arguments_prompt_shows_each_property_and_the_examples() -> None:
    engine = Writes({"send": 5.0, "DONE": 0.0})
    run(SEND, engine, "Send 40 to Asha")
    first = next(c for c in engine.calls if "DONE" not in c.options)
    turn = first.prompt.messages[-1].content
    assert turn.splitlines() == [
        "Arguments of send:",
        "- payee (string; required): who receives it",
        "- amount (number; required)",
        '- currency (string; optional; one of "USD", "EUR")',
        "- memo (string; optional)",
        "Examples:",
        '- "send 20 to Bo" → {"payee": "Bo", "amount": 20}',
        'Request: "Send 40 to Asha"',
        "Value of payee, copied from the request:"]
    assert first.prompt.messages[-2].content == "send"  # the leaf's answer, then the ask


def test_an_empty_schema_takes_no_call() -> None:
    engine = Writes({"pay": 5.0, "DONE": 0.0})
    catalog = {"name": "r", "children": [{"name": "pay", "description": "Pay."}]}
    state = run(catalog, engine, "pay")
    assert state.calls[0]["arguments"] == {} and engine.schemas == []
    call = leaf_event(state, "pay").arguments_call
    assert call.usage.model_calls == 0 and call.fallback is None


def test_a_required_value_with_no_candidate_is_written_under_its_schema() -> None:
    engine = Writes({"pay": 5.0, "DONE": 0.0}, text='{"amount": 7}')
    state = run(CATALOG, engine, "pay the plumber", MissingValues.WRITE)
    assert engine.schemas == [{"type": "object", "properties": {"amount": {"type": "number"}},
                               "required": ["amount"], "additionalProperties": False}]
    assert state.calls[0]["arguments"] == {"amount": 7}
    call = leaf_event(state, "pay").arguments_call
    assert call.fallback == "free_text" and call.usage.model_calls == 1


def test_free_text_cut_off_at_the_cap_is_a_misstep() -> None:
    engine = Writes({"pay": 5.0, "DONE": 0.0}, text='{"amount": 7', finish_reason="length")
    state = run(CATALOG, engine, "pay the plumber", MissingValues.WRITE)
    assert state.calls == [] or state.calls[0].get("error")
    assert state.num_format_failures >= 1


@pytest.mark.model
def test_real_model_makes_the_readme_call(engine: Any) -> None:
    """The README's command: exactly one call, send_money with payee Asha and amount 500."""
    from pathlib import Path

    from stackroute.runtime.catalog import load_catalog
    from stackroute.server.routing.calibration import router_options

    catalog = Path(__file__).resolve().parents[3] / "examples" / "bank.catalog.json"
    tree = load_catalog(catalog)
    machine = build_machine(tree, engine, options=router_options(engine.info.model))
    state = run_query(machine, Query(id="readme", query="Send 500 dollars to Asha", gold=(),
                                     args=None, tags=()))
    assert [(c["path"], c["arguments"]) for c in state.calls] == [
        ("payments/send_money", {"payee": "Asha", "amount": 500})]


WINE = {"name": "r", "children": [{"name": "wine", "description": "Facts about a wine.",
    "parameters": {"type": "object", "properties": {
        "wine_name": {"type": "string"},
        "country": {"type": "string", "description": "where it is made"},
        "grape": {"type": "string"}},
        "required": ["wine_name"]}}]}


@pytest.mark.parametrize(("text", "expected"), [
    ("Tell me about the Cabernet Sauvignon wine from Italy.",
     {"wine_name": "Cabernet Sauvignon", "country": "Italy"}),
    ("Tell me about the Cabernet Sauvignon wine.", {"wine_name": "Cabernet Sauvignon"}),
])
def test_a_name_after_a_place_word_supports_an_optional_place(
        text: str, expected: dict[str, str]) -> None:
    """A request holds a place's value without naming the property ("from Italy" for
    `country`): a name right after a place preposition is a value of that kind only; `grape`
    is not offered it (the words-gate, with the candidates' priors)."""
    from stackroute.server.routing.options import ArgumentValues

    engine = Writes({"wine": 5.0, "DONE": 0.0})
    options = replace(product_options(engine), argument_values=ArgumentValues.PRIORS)
    machine = build_machine(build_tree(WINE), engine, options=options)
    state = run_query(machine, Query(id="q", query=text, gold=(), args=None, tags=()))
    assert state.calls[0]["arguments"] == expected


ONE_WAY = {"name": "r", "children": [{"name": "reach", "description": "Reach a person.",
    "parameters": {"type": "object", "properties": {
        "name": {"type": "string"}, "email": {"type": "string"}, "phone": {"type": "string"}},
        "required": ["name"], "oneOf": [{"required": ["email"]}, {"required": ["phone"]}]}}]}


def test_a_call_the_schema_refused_as_a_whole_is_written_again_not_repeated() -> None:
    """The values the request holds fit each property, but the object does not (both ways of
    reaching her, where `oneOf` takes one): the choices alone would make the same refused
    call on every retry; the retry writes the object under the whole schema instead."""
    engine = Writes({"reach": 5.0, "DONE": 0.0}, text='{"name": "Asha", "email": "a@x.org"}')
    state = run(ONE_WAY, engine, "Reach Asha at a@x.org or +1 415 555 0100")
    assert state.num_format_failures == 1
    assert [(c["path"], c["arguments"]) for c in state.calls] == [
        ("reach", {"name": "Asha", "email": "a@x.org"})]
    assert engine.schemas == [ONE_WAY["children"][0]["parameters"]]  # the whole schema
    assert state.calls[0]["written_values"] == ["name", "email"]  # the model wrote them


def test_value_menus_drop_a_value_the_schema_refused_for_its_property() -> None:
    tree = build_tree(SEND)
    leaf = tree.node("send")
    menus = ValueMenus.read(leaf, "Send 40 euros to Asha and 10 to Li")
    refused = RefusedArguments("send", {"payee": "Asha", "amount": 40}, ("amount",))
    kept = menus.refusing([refused])
    assert [c.value for c in kept.by_property["amount"]] == [10]
    assert kept.by_property["payee"] == menus.by_property["payee"]  # not named: kept
    other_leaf = RefusedArguments("pay", {"amount": 40}, ("amount",))
    assert menus.refusing([other_leaf]) is menus


def test_none_on_an_optional_value_menu_takes_the_options_bias() -> None:
    """A model that says NONE too readily (the 1.5B) gets `NONE` lowered by its calibration's
    `none_bias`; the other options keep their priors."""
    for none_bias in (0.0, -3.0):
        engine = Writes({"send": 5.0, "DONE": 0.0})
        options = replace(product_options(engine), none_bias=none_bias)
        machine = build_machine(build_tree(SEND), engine, options=options)
        # (the memo is named, so its menu is offered with NONE; "40 euros" would be a
        # currency code, offered without)
        run_query(machine, Query(id="q", query="Send 40 to Asha with the memo lunch", gold=(),
                                 args=None, tags=()))
        (menu,) = [c for c in engine.calls if "NONE" in c.options]
        assert menu.bias is not None and menu.bias["NONE"] == none_bias


STAY = {"name": "r", "children": [{"name": "modify_stay", "description": "Change a stay.",
    "parameters": {"type": "object", "properties": {
        "confirmation_number": {"type": "string", "pattern": "^HC-[0-9]{7}$"},
        "new_check_in": {"type": "string", "format": "date"},
        "new_check_out": {"type": "string", "format": "date"}},
        "required": ["confirmation_number"]}}]}


def test_an_optional_property_is_not_offered_the_value_another_one_fits_better() -> None:
    """"push my checkout to 2027-09-13": the date is new_check_out's (its name labels it).
    Where the model chooses, new_check_in was asked first and took it (the 1.5B, an unseen
    travel catalog, tr-9), and new_check_out was offered it again; an optional property now
    gets neither a value already given nor one the priors' assignment gives another."""
    engine = Writes({"modify_stay": 5.0, "DONE": 0.0})
    state = run(STAY, engine, "hotel conf HC-7734921 - push my checkout to 2027-09-13 please")
    assert state.calls[0]["arguments"] == {"confirmation_number": "HC-7734921",
                                           "new_check_out": "2027-09-13"}
