"""runtime/schemas.py: the fast schema check agrees with the 2020-12 metaschema (tier a)."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from machine_kit import SEND_MONEY_SCHEMA
from stackroute.runtime import schemas
from stackroute.runtime.schemas import argument_errors, schema_error

# The reference: the full metaschema, with the "regex" format asserted (schemas.py documents
# that it refuses patterns Python cannot compile), and the plain metaschema.
META = jsonschema.Draft202012Validator(
    jsonschema.Draft202012Validator.META_SCHEMA,
    format_checker=jsonschema.FormatChecker(formats=["regex"]),
)
PLAIN_META = jsonschema.Draft202012Validator(jsonschema.Draft202012Validator.META_SCHEMA)


def meta_ok(schema: Any) -> bool:
    return META.is_valid(schema)


def plain_meta_ok(schema: Any) -> bool:
    return PLAIN_META.is_valid(schema)


# (schema, valid under the metaschema, decided by the fast path alone)
SCHEMA_TABLE: list[tuple[dict[Any, Any], bool, bool]] = [
    ({}, True, True),
    ({"type": "object", "properties": {}}, True, True),
    (SEND_MONEY_SCHEMA, True, True),
    ({"type": ["string", "null"]}, True, True),
    ({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9,
                                             "default": 3, "examples": [1, 2]}}}, True, True),
    ({"properties": {"a": True, "b": False}}, True, True),
    ({"type": "array", "items": {"type": "string"}, "minItems": 1, "uniqueItems": True}, True,
     True),
    ({"enum": []}, True, True),
    ({"enum": [1, 1, "a"]}, True, True),
    ({"type": "string", "pattern": "^[a-z]+$", "format": "email", "x-unit": "cm"}, True, True),
    ({"type": "number", "multipleOf": 0.5, "exclusiveMinimum": -1.5}, True, True),
    ({"$comment": "a note", "title": "T", "description": "D", "const": {"a": [1]}}, True, True),
    ({"additionalProperties": {"type": "integer"}}, True, True),
    ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, True, False),
    ({"$defs": {"x": {"type": "string"}}, "properties": {"a": {"$ref": "#/$defs/x"}}}, True,
     False),
    ({"minLength": 1.0}, True, False),  # an integer-valued float: the metaschema accepts it
    ({"unknownKeyword": [1, 2]}, True, False),
    ({1: "x"}, True, False),  # a YAML key that is not a string
    ({"type": "strin"}, False, False),
    ({"type": []}, False, False),
    ({"type": ["string", "string"]}, False, False),
    ({"type": 1}, False, False),
    ({"required": "a"}, False, False),
    ({"required": ["a", "a"]}, False, False),
    ({"required": [1]}, False, False),
    ({"minLength": -1}, False, False),
    ({"minLength": True}, False, False),
    ({"maximum": "9"}, False, False),
    ({"multipleOf": 0}, False, False),
    ({"multipleOf": -2}, False, False),
    ({"uniqueItems": 1}, False, False),
    ({"enum": "abc"}, False, False),
    ({"properties": []}, False, False),
    ({"properties": {"a": 1}}, False, False),
    ({"items": [{}]}, False, False),  # tuple form is draft 2019 and earlier
    ({"additionalProperties": "no"}, False, False),
    ({"description": 3}, False, False),
    ({"format": 3}, False, False),
    ({"examples": "not a list"}, False, False),
    ({"$comment": 1}, False, False),
    ({"pattern": "("}, False, False),
    ({"properties": {"a": {"properties": {"b": {"type": "nope"}}}}}, False, False),
]


@pytest.mark.parametrize(("schema", "is_valid", "is_fast"), SCHEMA_TABLE,
                         ids=[repr(s)[:60] for s, _, _ in SCHEMA_TABLE])
def test_schema_table(schema: dict[Any, Any], is_valid: bool, is_fast: bool) -> None:
    assert meta_ok(schema) is is_valid
    assert (schema_error(schema) is None) is is_valid
    assert schemas._is_simple_valid(schema, 0) is is_fast


def test_schema_error_names_where() -> None:
    assert schema_error({"properties": {"a": {"type": "nope"}}}) == (
        "at properties/a/type: 'nope' is not valid under any of the given schemas")
    assert schema_error({"minLength": -1}) == "at minLength: -1 is less than the minimum of 0"


# -- random schemas -------------------------------------------------------------------------
KEYS = (
    "type", "enum", "required", "properties", "items", "additionalProperties", "minLength",
    "maxItems", "minProperties", "minimum", "exclusiveMaximum", "multipleOf", "uniqueItems",
    "description", "title", "format", "pattern", "$comment", "examples", "default", "const",
    "x-unit", "anyOf", "$ref", "patternProperties", "prefixItems", "unknown", "deprecated",
)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3)
    | st.floats(allow_nan=False, allow_infinity=False, width=32) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                 max_size=3),
    max_leaves=6,
)
TYPE_NAMES = st.sampled_from(["object", "array", "string", "number", "integer", "boolean",
                              "null", "strin"])
PATTERNS = st.sampled_from(["^a", "[a-z]+", r"\d{3}", "(", "a{2", ")", "[", "x|y"])
NUMBERS = st.integers(-3, 5) | st.floats(-3, 5, allow_nan=False) | st.booleans()


@st.composite
def random_schema(draw: st.DrawFn, depth: int = 0) -> Any:
    if depth > 3 or draw(st.integers(0, 9)) == 0:
        return draw(st.booleans() | st.just({}) | JSON)
    sub = random_schema(depth + 1)
    out: dict[str, Any] = {}
    for key in draw(st.lists(st.sampled_from(KEYS), max_size=5, unique=True)):
        if key == "type":
            value = draw(TYPE_NAMES | st.lists(TYPE_NAMES, max_size=3) | JSON)
        elif key in ("enum", "examples", "prefixItems", "anyOf"):
            value = draw(st.lists(sub, max_size=3) | JSON)
        elif key == "required":
            value = draw(st.lists(st.sampled_from(["a", "b", "c", 1]), max_size=3) | JSON)
        elif key in ("properties", "patternProperties"):
            value = draw(st.dictionaries(PATTERNS | st.text(max_size=2), sub, max_size=3) | JSON)
        elif key in ("items", "additionalProperties"):
            value = draw(sub)
        elif key in ("minLength", "maxItems", "minProperties", "minimum", "exclusiveMaximum",
                     "multipleOf"):
            value = draw(NUMBERS | JSON)
        elif key in ("uniqueItems", "deprecated"):
            value = draw(st.booleans() | JSON)
        elif key == "pattern":
            value = draw(PATTERNS | JSON)
        elif key == "$ref":
            value = draw(st.sampled_from(["#", "#/$defs/a", "other.json"]) | JSON)
        else:
            value = draw(st.text(max_size=4) | JSON)
        out[key] = value
    return out


@settings(max_examples=150, deadline=None)
@given(random_schema())
def test_fast_check_never_says_valid_for_what_the_metaschema_rejects(schema: Any) -> None:
    if schemas._is_simple_valid(schema, 0):
        assert meta_ok(schema), schema
        assert plain_meta_ok(schema), schema
    if isinstance(schema, dict):
        assert (schema_error(schema) is None) is meta_ok(schema), schema


# -- argument validation --------------------------------------------------------------------
ARGUMENT_TABLE: list[tuple[Any, dict[str, Any], list[str]]] = [
    (None, {}, []),
    (None, {"b": 1, "a": 2}, ["takes no arguments, got ['a', 'b']"]),
    ({"type": "object", "properties": {}}, {}, []),
    (SEND_MONEY_SCHEMA, {"payee": "Asha", "amount": 500}, []),
    (SEND_MONEY_SCHEMA, {"payee": "Asha", "amount": 5.5}, []),
    (SEND_MONEY_SCHEMA, {"payee": "Asha"}, ["(top): 'amount' is a required property"]),
    (SEND_MONEY_SCHEMA, {"payee": "Asha", "amount": "500"},
     ["amount: '500' is not of type 'number'"]),
    (SEND_MONEY_SCHEMA, {"payee": "Asha", "amount": 1, "memo": "x"},
     ["(top): Additional properties are not allowed ('memo' was unexpected)"]),
    ({"type": "object", "properties": {"k": {"enum": ["a", "b"]}}}, {"k": "c"},
     ["k: 'c' is not one of ['a', 'b']"]),
    ({"type": "object", "properties": {"n": {"type": "integer", "maximum": 12}}}, {"n": 13},
     ["n: 13 is greater than the maximum of 12"]),
]


@pytest.mark.parametrize(("schema", "arguments", "expected"), ARGUMENT_TABLE)
def test_argument_errors(schema: Any, arguments: dict[str, Any], expected: list[str]) -> None:
    assert argument_errors(schema, arguments) == expected


def test_unresolvable_reference_is_an_error_not_a_crash() -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}
    assert schema_error(schema) is None  # the metaschema cannot see it
    [error] = argument_errors(schema, {"a": "x"})
    assert error.startswith("the schema cannot be applied: unresolvable reference")
