"""Issue 15.12: constructs whose compiled grammar grows past a budget (deep oneOf/anyOf
nesting, huge `{m,n}` repeats, huge length bounds) are refused before compilation, naming
the construct; ordinary schemas pass."""

from __future__ import annotations

from typing import Any

import pytest
from stackroute.runtime.grammar_budget import regex_budget_problem, schema_budget_problem


def nested(key: str, depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {key: [schema, {"type": "integer"}]}
    return {"type": "object", "properties": {"x": schema}}


@pytest.mark.parametrize(("schema", "words"), [
    (nested("oneOf", 40), "oneOf/anyOf/allOf nested"),
    (nested("anyOf", 40), "oneOf/anyOf/allOf nested"),
    ({"type": "object", "properties": {"s": {"type": "string", "pattern": "^a{1,100000}$"}}},
     "repeat"),
    ({"type": "object", "properties": {"s": {"type": "string", "maxLength": 10_000_000}}},
     "maxLength"),
    ({"type": "object", "properties": {"s": {"type": "array", "minItems": 500_000}}},
     "minItems"),
])
def test_constructs_past_the_budget_are_named(schema: dict[str, Any], words: str) -> None:
    problem = schema_budget_problem(schema)
    assert problem is not None and words in problem


@pytest.mark.parametrize("schema", [
    nested("oneOf", 4),
    {"type": "object", "properties": {"ip": {"type": "string",
                                             "pattern": r"^(\d{1,3}\.){3}\d{1,3}$"}}},
    {"type": "object", "properties": {"s": {"type": "string", "maxLength": 2000}}},
])
def test_ordinary_schemas_pass(schema: dict[str, Any]) -> None:
    assert schema_budget_problem(schema) is None


@pytest.mark.parametrize(("pattern", "is_refused"), [
    ("a{1,100000}", True),
    ("(a{1,200}){1,200}", True),  # 40,000 states from nesting
    ("[a-z]{1,64}", False),
    (r"\d{4}-\d{2}-\d{2}", False),
])
def test_regex_repeats_are_bounded(pattern: str, is_refused: bool) -> None:
    assert (regex_budget_problem(pattern) is not None) is is_refused
