"""Numbers end: a schema integer or number with no bound lets a small model write digits until
the token cap (measured: SmolLM2 wrote `"income":1000…` for 384 tokens, so a Seal-Tools leaf
call failed six times and the run wandered to its step limit). `cap_number_sizes` bounds them;
the grammar then refuses a sixteenth digit. No model: the grammar with the real tokenizer."""

from __future__ import annotations

import json
from typing import Any

import pytest
from stackroute.grammars.number_caps import MAX_INTEGER, MAX_NUMBER, cap_number_sizes
from stackroute.grammars.schema import GrammarTokenizerInfo, compile_schema

RISK = {"type": "object", "properties": {"age": {"type": "integer"}, "income": {"type": "number"}},
        "required": ["age", "income"]}


def accepts(info: GrammarTokenizerInfo, tokenizer: Any, schema: dict[str, Any],
            text: str) -> bool:
    matcher = compile_schema(schema, info).matcher()
    return all(matcher.accept(t) for t in tokenizer.encode(text, add_special_tokens=False)) \
        and matcher.is_complete


def test_unbounded_numbers_get_both_bounds_and_the_callers_schema_is_kept() -> None:
    before = json.dumps(RISK, sort_keys=True)
    capped = cap_number_sizes(RISK)
    assert capped["properties"]["age"] == {"type": "integer", "minimum": -MAX_INTEGER,
                                           "maximum": MAX_INTEGER}
    assert capped["properties"]["income"] == {"type": "number", "minimum": -MAX_NUMBER,
                                              "maximum": MAX_NUMBER}
    assert json.dumps(RISK, sort_keys=True) == before


@pytest.mark.parametrize(("node", "expected"), [
    ({"type": "integer", "minimum": 0}, {"type": "integer", "minimum": 0,
                                         "maximum": MAX_INTEGER}),
    ({"type": "number", "exclusiveMaximum": 1}, {"type": "number", "exclusiveMaximum": 1,
                                                 "minimum": -MAX_NUMBER}),
    ({"type": "integer", "minimum": 1, "maximum": 5}, {"type": "integer", "minimum": 1,
                                                       "maximum": 5}),
    ({"type": ["integer", "null"]}, {"type": ["integer", "null"], "minimum": -MAX_INTEGER,
                                     "maximum": MAX_INTEGER}),
    ({"type": "integer", "enum": [1, 2]}, {"type": "integer", "enum": [1, 2]}),
    # an author's bound beyond ours: that side stays open rather than an empty range
    ({"type": "integer", "minimum": 10 ** 20}, {"type": "integer", "minimum": 10 ** 20}),
])
def test_the_authors_bounds_win(node: dict[str, Any], expected: dict[str, Any]) -> None:
    assert cap_number_sizes(node) == expected


def test_nested_numbers_are_capped() -> None:
    schema = {"type": "object", "properties": {"points": {"type": "array", "items": {
        "type": "object", "properties": {"x": {"type": "number"}}}}},
        "$defs": {"n": {"anyOf": [{"type": "integer"}, {"type": "string"}]}}}
    capped = cap_number_sizes(schema)
    assert capped["properties"]["points"]["items"]["properties"]["x"]["maximum"] == MAX_NUMBER
    assert capped["$defs"]["n"]["anyOf"][0]["maximum"] == MAX_INTEGER
    assert "maximum" not in capped["$defs"]["n"]["anyOf"][1]


def test_the_grammar_refuses_a_runaway_number(
        smollm2_tokenizer: Any, smollm2_grammar_info: GrammarTokenizerInfo) -> None:
    runaway = '{"age":18,"income":1' + "0" * 40 + "}"
    assert accepts(smollm2_grammar_info, smollm2_tokenizer, RISK, runaway)  # the bug
    capped = cap_number_sizes(RISK)
    assert not accepts(smollm2_grammar_info, smollm2_tokenizer, capped, runaway)
    for fine in ('{"age":18,"income":19.4}', '{"age":-3,"income":0.000001}',
                 '{"age":999999999999999,"income":-1000000000000000}'):
        assert accepts(smollm2_grammar_info, smollm2_tokenizer, capped, fine), fine
