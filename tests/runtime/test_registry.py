"""Capabilities registered from Python: schemas from type hints, handler binding (tier a/b)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, Optional

import pytest
from machine_kit import drive, make_machine
from stackroute.runtime.errors import CatalogError
from stackroute.runtime.registry import Capabilities, schema_from_hints
from stackroute.runtime.schemas import schema_error


def f_simple(name: str, count: int, ratio: float, flag: bool) -> None: ...
def f_list(tags: list[str], ids: list[int], anything: list) -> None: ...  # type: ignore[type-arg]
def f_literal(mode: Literal["fast", "slow"]) -> None: ...
def f_optional_default(limit: Optional[int] = None, city: str | None = None) -> None: ...  # noqa: UP045
def f_optional_no_default(note: str | None) -> None: ...
def f_defaults(text: str = "hi", n: int = 3, x: float = 0.5, on: bool = False,
               tags: list[str] | None = None) -> None: ...
def f_varargs(a: int, *rest: int, **extra: Any) -> None: ...
def f_untyped(a, b=1):  # type: ignore[no-untyped-def]
    ...
def f_mapping(options: dict[str, int], pair: tuple[int, int], both: int | str) -> None: ...
def f_none() -> None: ...


HINT_TABLE: list[tuple[Callable[..., Any], dict[str, Any]]] = [
    (f_simple, {"type": "object",
                "properties": {"name": {"type": "string"}, "count": {"type": "integer"},
                               "ratio": {"type": "number"}, "flag": {"type": "boolean"}},
                "required": ["name", "count", "ratio", "flag"]}),
    (f_list, {"type": "object",
              "properties": {"tags": {"type": "array", "items": {"type": "string"}},
                             "ids": {"type": "array", "items": {"type": "integer"}},
                             "anything": {"type": "array"}},
              "required": ["tags", "ids", "anything"]}),
    (f_literal, {"type": "object", "properties": {"mode": {"enum": ["fast", "slow"]}},
                 "required": ["mode"]}),
    (f_optional_default, {"type": "object",
                          "properties": {"limit": {"type": "integer"},
                                         "city": {"type": "string"}}}),
    # no default: it must be passed, or calling the handler would raise TypeError
    (f_optional_no_default, {"type": "object", "properties": {"note": {"type": "string"}},
                             "required": ["note"]}),
    (f_defaults, {"type": "object",
                  "properties": {"text": {"type": "string", "default": "hi"},
                                 "n": {"type": "integer", "default": 3},
                                 "x": {"type": "number", "default": 0.5},
                                 "on": {"type": "boolean", "default": False},
                                 "tags": {"type": "array", "items": {"type": "string"}}}}),
    (f_varargs, {"type": "object", "properties": {"a": {"type": "integer"}},
                 "required": ["a"]}),
    (f_untyped, {"type": "object", "properties": {"a": {}, "b": {"default": 1}},
                 "required": ["a"]}),
    (f_mapping, {"type": "object",
                 "properties": {"options": {"type": "object"},
                                "pair": {"type": "array", "items": {"type": "integer"}},
                                "both": {}},
                 "required": ["options", "pair", "both"]}),
    (f_none, {"type": "object", "properties": {}}),
]


@pytest.mark.parametrize(("fn", "expected"), HINT_TABLE, ids=[f.__name__ for f, _ in HINT_TABLE])
def test_schema_from_hints(fn: Callable[..., Any], expected: dict[str, Any]) -> None:
    schema = schema_from_hints(fn)
    assert schema == expected
    assert schema_error(schema) is None


def bank_capabilities(log: list[tuple[str, Any]]) -> Capabilities:
    caps = Capabilities("bank", "Banking tools")
    caps.router("payments", "Send, receive and track payments.")

    @caps.leaf("payments/send_money", sensitive=True)
    def send_money(payee: str, amount: float) -> dict[str, Any]:
        """Send money to a contact or an account.

        Longer text that is not part of the description.
        """
        log.append(("send_money", (payee, amount)))
        return {"sent": amount, "to": payee}

    @caps.leaf("payments/history", description="Past payments.",
               parameters={"type": "object", "properties": {"days": {"type": "integer"}},
                           "required": ["days"]})
    def history(days: int) -> list[str]:
        log.append(("history", days))
        return [f"day {d}" for d in range(days)]

    @caps.leaf("/tools/convert/")
    def convert(amount: float, currency: Literal["EUR", "USD"] = "EUR") -> float:
        "Convert an amount."
        log.append(("convert", (amount, currency)))
        return amount * 2

    return caps


def test_to_catalog_document() -> None:
    caps = bank_capabilities([])
    assert caps.to_catalog() == {
        "name": "bank", "description": "Banking tools",
        "children": [
            {"name": "payments", "description": "Send, receive and track payments.",
             "children": [
                 {"name": "send_money", "description": "Send money to a contact or an account.",
                  "parameters": {"type": "object",
                                 "properties": {"payee": {"type": "string"},
                                                "amount": {"type": "number"}},
                                 "required": ["payee", "amount"]},
                  "sensitive": True},
                 {"name": "history", "description": "Past payments.",
                  "parameters": {"type": "object", "properties": {"days": {"type": "integer"}},
                                 "required": ["days"]}},
             ]},
            {"name": "tools", "description": "", "children": [
                {"name": "convert", "description": "Convert an amount.",
                 "parameters": {"type": "object",
                                "properties": {"amount": {"type": "number"},
                                               "currency": {"enum": ["EUR", "USD"],
                                                            "default": "EUR"}},
                                "required": ["amount"]}},
            ]},
        ],
    }


def test_build_binds_handlers_and_runs_them_through_the_machine() -> None:
    log: list[tuple[str, Any]] = []
    tree, handlers = bank_capabilities(log).build()
    assert tree.node("payments/send_money").sensitive
    assert tree.node("tools/convert").handler is None  # bound by the decorator, not by path
    machine = make_machine(
        ["payments", ("history", {"days": 2}), "DONE", "tools",
         ("convert", {"amount": 4, "currency": "USD"}), "DONE", "DONE"],
        tree=tree, handlers=handlers)
    state = machine.start("history then convert", run_id="r")
    drive(machine, state)
    assert state.status.value == "done"
    assert log == [("history", 2), ("convert", (4, "USD"))]
    assert [(c["path"], c["result"]) for c in state.calls] == [
        ("payments/history", ["day 0", "day 1"]), ("tools/convert", 8)]


def test_sensitive_registered_leaf_waits_at_the_gate() -> None:
    log: list[tuple[str, Any]] = []
    tree, handlers = bank_capabilities(log).build()
    machine = make_machine(["payments", ("send_money", {"payee": "Asha", "amount": 5}),
                            "DONE", "DONE"], tree=tree, handlers=handlers)
    state = machine.start("send 5 to Asha", run_id="r")
    drive(machine, state, max_transitions=2)
    assert state.status.value == "paused" and log == []
    drive(machine, state)
    assert log == [("send_money", ("Asha", 5))]


def test_registering_a_leaf_twice_is_refused() -> None:
    caps = Capabilities()

    @caps.leaf("a/b")
    def first() -> None: ...

    with pytest.raises(CatalogError, match="a/b: leaf registered twice"):
        @caps.leaf("a/b")
        def second() -> None: ...


def test_invalid_registrations_fail_at_build() -> None:
    caps = Capabilities()

    @caps.leaf("x/DONE")
    def done() -> None: ...

    @caps.leaf("x/ok", parameters={"type": "nope"})
    def ok() -> None: ...

    with pytest.raises(CatalogError) as info:
        caps.build()
    assert [p.path for p in info.value.problems] == ["x/DONE", "x/ok"]


def test_a_leaf_and_a_router_at_one_path_collide() -> None:
    caps = Capabilities()
    caps.router("a", "A router")

    @caps.leaf("a")
    def a() -> None: ...

    @caps.leaf("a/b")
    def b() -> None: ...

    with pytest.raises(CatalogError) as info:
        caps.build()
    assert [(p.path, p.message) for p in info.value.problems] == [
        ("a", "duplicate sibling name 'a' (also child #0)")]
