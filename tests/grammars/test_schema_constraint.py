"""JSON-schema and regex constraints: compile, accept, reject, mask, decode."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import jsonschema
import numpy as np
import pytest
from stackroute.grammars.decode import FinishReason, greedy_decode
from stackroute.grammars.schema import (
    ConstraintMatcher,
    GrammarKind,
    GrammarTokenizerInfo,
    InvalidGrammarError,
    compile_regex,
    compile_schema,
    grammar_tokenizer_info,
)
from stackroute.runtime.errors import InputError
from tokenizers import Tokenizer

FakeModelFactory = Callable[..., Any]  # conftest.ClosingBiasedModel

SEND_MONEY = {
    "type": "object",
    "properties": {"payee": {"type": "string"}, "amount": {"type": "number"}},
    "required": ["payee", "amount"],
}

# (schema, compact JSON it accepts)
VALID = [
    (SEND_MONEY, '{"payee":"Asha","amount":500}'),
    ({"type": "integer", "minimum": 1, "maximum": 12}, "12"),
    ({"type": "number", "minimum": 0.5, "maximum": 2}, "1.5"),
    ({"type": "boolean"}, "false"),
    ({"enum": ["a", 1, True, None]}, "true"),
    ({"type": "string", "enum": ["Los Angeles", "Boston"]}, '"Los Angeles"'),
    ({"type": "string", "maxLength": 3}, '"abc"'),
    ({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 2}, "[1,2]"),
    ({"type": "object", "properties": {"名前": {"type": "string"}}}, '{"名前":"café 🚀"}'),
    ({"type": "object", "properties": {}}, "{}"),
    ({"anyOf": [{"type": "string"}, {"type": "null"}]}, "null"),
    (
        {
            "type": "object",
            "properties": {
                "team_name": {"type": "string", "description": "e.g. Lakers"},
                "period": {"type": "integer", "x-unit": "quarter", "examples": [1, 2]},
            },
            "required": ["team_name"],
        },
        '{"team_name":"Golden State Warriors","period":4}',
    ),
]

# (schema, JSON the grammar must refuse somewhere along the way)
INVALID = [
    (SEND_MONEY, '{"amount":500,"payee":"Asha"}'),  # properties in declared order only
    (SEND_MONEY, '{"payee":"Asha"}'),  # required key missing
    (SEND_MONEY, '{"payee": "Asha","amount":500}'),  # free whitespace
    (SEND_MONEY, '{"payee":"Asha","amount":500,"note":"x"}'),  # strict: no extra keys
    ({"type": "integer", "minimum": 1, "maximum": 12}, "13"),
    ({"type": "number", "minimum": 0.5, "maximum": 2}, "2.5"),
    ({"type": "boolean"}, '"false"'),
    ({"type": "string", "enum": ["Los Angeles", "Boston"]}, '"Chicago"'),
    ({"type": "string", "maxLength": 3}, '"abcd"'),
    ({"type": "array", "items": {"type": "integer"}, "minItems": 1}, "[]"),
    ({"type": "array", "items": {"type": "integer"}, "maxItems": 2}, "[1,2,3]"),
]


def whitespace_outside_strings(text: str) -> bool:
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char.isspace():
            return True
    return False


def feed(matcher: ConstraintMatcher, token_ids: list[int]) -> bool:
    return all(matcher.accept(token) for token in token_ids)


def encode(tokenizer: object, text: str) -> list[int]:
    return list(tokenizer.encode(text, add_special_tokens=False))  # type: ignore[attr-defined]


@pytest.mark.parametrize(("schema", "text"), VALID)
def test_accepts_valid_json_then_the_stop_token(
    smollm2_tokenizer: object, smollm2_grammar_info: GrammarTokenizerInfo, schema: Any, text: str
) -> None:
    compiled = compile_schema(schema, smollm2_grammar_info)
    assert compiled.kind is GrammarKind.JSON_SCHEMA
    assert compiled.compile_ms > 0.0
    matcher = compiled.matcher()
    assert feed(matcher, encode(smollm2_tokenizer, text))
    assert matcher.is_complete and not matcher.is_finished
    assert matcher.accept(smollm2_grammar_info.stop_token_ids[0])
    assert matcher.is_finished
    assert matcher.text() == text
    assert not matcher.allowed_mask().any()  # nothing after the stop token
    assert not matcher.accept(encode(smollm2_tokenizer, "x")[0])


@pytest.mark.parametrize(("schema", "text"), INVALID)
def test_rejects_invalid_json(
    smollm2_tokenizer: object, smollm2_grammar_info: GrammarTokenizerInfo, schema: Any, text: str
) -> None:
    matcher = compile_schema(schema, smollm2_grammar_info).matcher()
    tokens = encode(smollm2_tokenizer, text)
    accepted_all = feed(matcher, tokens)
    assert not (accepted_all and matcher.accept(smollm2_grammar_info.stop_token_ids[0]))


def test_stop_token_is_refused_before_the_json_is_complete(
    smollm2_tokenizer: object, smollm2_grammar_info: GrammarTokenizerInfo
) -> None:
    matcher = compile_schema(SEND_MONEY, smollm2_grammar_info).matcher()
    assert feed(matcher, encode(smollm2_tokenizer, '{"payee":"A"'))
    assert not matcher.is_complete
    assert not matcher.accept(smollm2_grammar_info.stop_token_ids[0])


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": "foo"}, "invalid JSON schema at type"),
        ({"type": "object", "required": "name"}, "invalid JSON schema at required"),
        ({"type": "string", "pattern": "(("}, "invalid JSON schema at pattern"),
        ({"$ref": "#/$defs/missing"}, "cannot compile JSON schema: .*missing"),
        (["not", "an", "object"], "must be an object"),
        ({"type": "string", "default": float("nan")}, "cannot compile JSON schema"),
    ],
)
def test_bad_schemas_raise_a_value_error_naming_the_problem(
    smollm2_grammar_info: GrammarTokenizerInfo, schema: Any, message: str
) -> None:
    with pytest.raises(InvalidGrammarError, match=message) as caught:
        compile_schema(schema, smollm2_grammar_info)
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, InputError)
    assert "/project/cpp" not in str(caught.value)  # no C++ log prefix


def test_first_mask_allows_only_object_openers(
    smollm2_grammar_info: GrammarTokenizerInfo,
) -> None:
    mask = compile_schema(SEND_MONEY, smollm2_grammar_info).matcher().allowed_mask()
    assert mask.shape == (smollm2_grammar_info.vocab_size,)
    assert mask.dtype == np.bool_
    allowed = {smollm2_grammar_info.decoded_vocab[t] for t in np.flatnonzero(mask)}
    assert allowed == {b"{", b'{"'}


def test_jump_forward_gives_the_forced_key(
    smollm2_tokenizer: object, smollm2_grammar_info: GrammarTokenizerInfo
) -> None:
    matcher = compile_schema(SEND_MONEY, smollm2_grammar_info).matcher()
    assert matcher.jump_forward_string() == '{"payee":"'
    forced = matcher.jump_forward_tokens()
    assert smollm2_grammar_info.text_of(forced) == '{"payee":"'
    assert feed(matcher, list(forced))


def test_padded_vocab_never_allows_padding_ids(smollm2_tokenizer: object) -> None:
    info = grammar_tokenizer_info(smollm2_tokenizer, 49152 + 64)
    mask = compile_regex(r"[a-z]{2,5}", info).matcher().allowed_mask()
    assert mask.shape == (49152 + 64,)
    assert mask[:49152].any()
    assert not mask[49152:].any()


def test_tokenizer_info_is_cached(
    smollm2_tokenizer: object, smollm2_grammar_info: GrammarTokenizerInfo
) -> None:
    assert grammar_tokenizer_info(smollm2_tokenizer, 49152) is smollm2_grammar_info
    assert smollm2_grammar_info.stop_token_ids == (2,)  # <|im_end|>


def test_raw_tokenizer_needs_stop_tokens(tiny_tokenizer: Tokenizer) -> None:
    with pytest.raises(ValueError, match="pass stop_token_ids"):
        grammar_tokenizer_info(tiny_tokenizer, 300)


def test_bad_regex_raises(smollm2_grammar_info: GrammarTokenizerInfo) -> None:
    with pytest.raises(InvalidGrammarError, match=r"cannot compile regex '\(\(':.*not closed"):
        compile_regex("((", smollm2_grammar_info)


SCHEMAS_TO_DECODE = [
    {"enum": ["red", "green", "blue"]},
    {"type": "string", "maxLength": 6},
    {"type": "integer"},
    {"type": "number"},
    {"type": "boolean"},
    SEND_MONEY,
    {
        "type": "object",
        "properties": {
            "trip": {
                "type": "object",
                "properties": {
                    "from": {"type": "string", "maxLength": 10},
                    "to": {"type": "string", "maxLength": 10},
                    "nights": {"type": "integer", "minimum": 1, "maximum": 30},
                },
                "required": ["from", "to"],
            },
            "travellers": {
                "type": "array",
                "items": {"type": "object", "properties": {"age": {"type": "integer"}}},
                "maxItems": 3,
            },
            "refundable": {"type": "boolean"},
        },
        "required": ["trip"],
    },
    {"type": "array", "items": {"enum": [1, 2.5, "x", None, False]}, "minItems": 2},
    {"type": "array", "items": {"type": "number", "minimum": 0}},
    {"type": "object", "properties": {"optional_only": {"type": "string"}}},
]


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("schema", SCHEMAS_TO_DECODE, ids=lambda s: json.dumps(s)[:40])
def test_decoding_random_logits_yields_valid_json(
    smollm2_grammar_info: GrammarTokenizerInfo,
    fake_model: FakeModelFactory,
    schema: dict[str, Any],
    seed: int,
) -> None:
    matcher = compile_schema(schema, smollm2_grammar_info).matcher()
    model = fake_model(smollm2_grammar_info, seed=seed)
    result = greedy_decode(model, matcher, max_tokens=400)
    assert result.finish_reason is FinishReason.STOP
    assert result.token_ids[-1] in smollm2_grammar_info.stop_token_ids
    assert result.num_model_steps + result.num_forced_tokens == len(result.token_ids)
    assert result.num_model_steps == model.num_calls
    jsonschema.validate(json.loads(result.text), schema)
    assert not whitespace_outside_strings(result.text)


def test_decoding_on_the_tiny_tokenizer(
    tiny_grammar_info: GrammarTokenizerInfo, fake_model: FakeModelFactory
) -> None:
    for seed, schema in enumerate(SCHEMAS_TO_DECODE):
        matcher = compile_schema(schema, tiny_grammar_info).matcher()
        result = greedy_decode(fake_model(tiny_grammar_info, seed=seed), matcher, max_tokens=400)
        assert result.finish_reason is FinishReason.STOP, schema
        jsonschema.validate(json.loads(result.text), schema)


def test_regex_decoding(
    smollm2_grammar_info: GrammarTokenizerInfo, fake_model: FakeModelFactory
) -> None:
    pattern = r"[0-9]{3}-[a-z]{2,4}"
    compiled = compile_regex(pattern, smollm2_grammar_info)
    assert compiled.kind is GrammarKind.REGEX
    for seed in range(5):
        result = greedy_decode(fake_model(smollm2_grammar_info, seed=seed), compiled.matcher(),
                               max_tokens=50)
        assert result.finish_reason is FinishReason.STOP
        assert re.fullmatch(pattern, result.text)


def test_length_limit(
    smollm2_grammar_info: GrammarTokenizerInfo, fake_model: FakeModelFactory
) -> None:
    matcher = compile_schema(SEND_MONEY, smollm2_grammar_info).matcher()
    result = greedy_decode(fake_model(smollm2_grammar_info, seed=0), matcher, max_tokens=2)
    assert result.finish_reason is FinishReason.LENGTH
    assert len(result.token_ids) == 2
    assert not matcher.is_finished
