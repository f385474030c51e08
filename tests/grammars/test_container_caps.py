"""Arrays and open objects end: without a count an array (or an object that allows keys it
does not list) lets a small model write items until the token cap, and an open value compiles
to xgrammar's own "any JSON" rule, where no string or number cap reaches. `bounded_schema`
bounds them all; the grammar then refuses the 17th item and a 65-character value. No model:
the grammar with the real tokenizer."""

from __future__ import annotations

import json
from typing import Any

import pytest
from stackroute.grammars.bounded import bounded_schema
from stackroute.grammars.container_caps import MAX_ITEMS, cap_container_sizes, scalar_schema
from stackroute.grammars.schema import GrammarTokenizerInfo
from test_number_caps import accepts

TAGS = {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}},
                                         "labels": {"type": "object"}},
        "required": ["tags"]}


def test_arrays_and_open_objects_get_a_count_and_the_callers_schema_is_kept() -> None:
    before = json.dumps(TAGS, sort_keys=True)
    capped = cap_container_sizes(TAGS)
    assert capped["properties"]["tags"] == {"type": "array", "items": {"type": "string"},
                                            "maxItems": MAX_ITEMS}
    assert capped["properties"]["labels"] == {
        "type": "object", "additionalProperties": scalar_schema(),
        "propertyNames": {"type": "string"}, "maxProperties": MAX_ITEMS}
    assert capped["required"] == ["tags"] and "maxProperties" not in capped  # closed: listed
    assert json.dumps(TAGS, sort_keys=True) == before


@pytest.mark.parametrize(("node", "expected"), [
    # the author's count wins, and so does a minimum above ours
    ({"type": "array", "items": {"type": "integer"}, "maxItems": 40},
     {"type": "array", "items": {"type": "integer"}, "maxItems": 40}),
    ({"type": "array", "items": {"type": "integer"}, "minItems": 20},
     {"type": "array", "items": {"type": "integer"}, "minItems": 20, "maxItems": 20}),
    # items said nothing: scalars (maxItems alone would compile to "only []")
    ({"type": "array"}, {"type": "array", "items": scalar_schema(), "maxItems": MAX_ITEMS}),
    ({"type": "array", "items": True},
     {"type": "array", "items": scalar_schema(), "maxItems": MAX_ITEMS}),
    # a tuple with nothing after it is bounded already
    ({"type": "array", "prefixItems": [{"type": "string"}], "items": False},
     {"type": "array", "prefixItems": [{"type": "string"}], "items": False}),
    # an object that lists its properties and says nothing more is closed in strict mode
    ({"type": "object", "properties": {}}, {"type": "object", "properties": {}}),
    ({"type": "object", "additionalProperties": False},
     {"type": "object", "additionalProperties": False}),
    # an author's value schema is kept; the count covers listed plus ours
    ({"type": "object", "properties": {"a": {"type": "string"}},
      "additionalProperties": {"type": "integer"}},
     {"type": "object", "properties": {"a": {"type": "string"}},
      "additionalProperties": {"type": "integer"}, "maxProperties": MAX_ITEMS + 1}),
    ({"type": "object", "maxProperties": 3},
     {"type": "object", "maxProperties": 3, "additionalProperties": scalar_schema(),
      "propertyNames": {"type": "string"}}),
    ({"type": "array", "enum": [[1], [2]]}, {"type": "array", "enum": [[1], [2]]}),
])
def test_the_authors_bounds_win(node: dict[str, Any], expected: dict[str, Any]) -> None:
    assert cap_container_sizes(node) == expected


def test_nested_containers_are_capped_and_the_inserted_scalars_bounded() -> None:
    schema = {"type": "object", "properties": {"rows": {"type": "array", "items": {
        "type": "object", "properties": {"cells": {"type": ["array", "null"]}}}}}}
    bounded = bounded_schema(schema, 10)
    cells = bounded["properties"]["rows"]["items"]["properties"]["cells"]
    assert bounded["properties"]["rows"]["maxItems"] == MAX_ITEMS
    assert cells["maxItems"] == MAX_ITEMS
    text, number = cells["items"]["anyOf"][:2]
    assert text == {"type": "string", "maxLength": 10}
    assert number["maximum"] == 10 ** 15 and number["minimum"] == -10 ** 15


def test_the_grammar_refuses_a_runaway_array(
        smollm2_tokenizer: Any, smollm2_grammar_info: GrammarTokenizerInfo) -> None:
    runaway = '{"tags":[' + ",".join(['"spam"'] * (MAX_ITEMS + 1)) + "]}"
    assert accepts(smollm2_grammar_info, smollm2_tokenizer, TAGS, runaway)  # the bug
    bounded = bounded_schema(TAGS, 64)
    assert not accepts(smollm2_grammar_info, smollm2_tokenizer, bounded, runaway)
    fine = '{"tags":[' + ",".join(['"spam"'] * MAX_ITEMS) + '],"labels":{"a":1,"b":"x"}}'
    assert accepts(smollm2_grammar_info, smollm2_tokenizer, bounded, fine)


def test_the_grammar_bounds_what_an_open_object_holds(
        smollm2_tokenizer: Any, smollm2_grammar_info: GrammarTokenizerInfo) -> None:
    bounded = bounded_schema(TAGS, 64)
    long_value = '{"tags":[],"labels":{"a":"' + "x" * 65 + '"}}'
    long_key = '{"tags":[],"labels":{"' + "k" * 65 + '":1}}'
    for runaway in (long_value, long_key):
        assert accepts(smollm2_grammar_info, smollm2_tokenizer, TAGS, runaway)  # the bug
        assert not accepts(smollm2_grammar_info, smollm2_tokenizer, bounded, runaway), runaway

    def labels(count: int, separator: str) -> str:
        pairs = separator.join(f'"k{i}":{i}' for i in range(count))
        return '{"tags":[],"labels":{' + pairs + "}}"

    # xgrammar's own "any object" separates its pairs with ", " (0.2.8, measured)
    assert accepts(smollm2_grammar_info, smollm2_tokenizer, TAGS, labels(MAX_ITEMS + 1, ", "))
    assert accepts(smollm2_grammar_info, smollm2_tokenizer, bounded, labels(MAX_ITEMS, ","))
    assert not accepts(smollm2_grammar_info, smollm2_tokenizer, bounded,
                       labels(MAX_ITEMS + 1, ","))
