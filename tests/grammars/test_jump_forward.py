"""Tier (a): canonical jump-forward and free-string caps, with the real tokenizer, no model."""

from __future__ import annotations

import json
from typing import Any

import pytest
from stackroute.grammars.jump_forward import JumpForward
from stackroute.grammars.schema import GrammarTokenizerInfo, compile_schema
from stackroute.grammars.string_caps import (
    cap_string_lengths,
    email_pattern,
    has_string_at_cap,
)

SEND_MONEY = {"type": "object",
              "properties": {"payee": {"type": "string"}, "amount": {"type": "number"}},
              "required": ["payee", "amount"]}
CARD = {"type": "object", "properties": {"card": {"type": "string",
                                                  "enum": ["debit", "credit"]}},
        "required": ["card"]}


def encoder(tokenizer: Any) -> Any:
    return lambda text: tokenizer.encode(text, add_special_tokens=False)


@pytest.fixture(scope="module")
def jump(smollm2_tokenizer: Any, smollm2_grammar_info: GrammarTokenizerInfo) -> JumpForward:
    return JumpForward(encoder(smollm2_tokenizer), smollm2_grammar_info.decoded_vocab)


def test_forced_text_comes_in_the_tokenizers_own_spelling(
        jump: JumpForward, smollm2_tokenizer: Any,
        smollm2_grammar_info: GrammarTokenizerInfo) -> None:
    matcher = compile_schema(SEND_MONEY, smollm2_grammar_info).matcher()
    assert matcher.jump_forward_string() == '{"payee":"'
    forced = jump.force(matcher, max_tokens=64)
    canonical = encoder(smollm2_tokenizer)('{"payee":"')
    assert list(forced) == canonical[:len(forced)]  # a prefix of the canonical spelling
    assert matcher.token_ids == forced  # accepted, nothing else
    # What is held back is only what a longer allowed token could spell differently.
    assert len(canonical) - len(forced) <= 1


def test_a_last_token_a_longer_allowed_token_extends_is_held_back(
        jump: JumpForward, smollm2_tokenizer: Any,
        smollm2_grammar_info: GrammarTokenizerInfo) -> None:
    matcher = compile_schema(SEND_MONEY, smollm2_grammar_info).matcher()
    forced = jump.force(matcher, max_tokens=64)
    canonical = encoder(smollm2_tokenizer)('{"payee":"')
    vocab = smollm2_grammar_info.decoded_vocab
    last = vocab[canonical[-1]]
    mask = matcher.allowed_mask()
    extenders = [t for t in range(len(vocab)) if mask[t] and vocab[t] != last
                 and vocab[t].startswith(last)]
    # Held back exactly when the grammar allows a longer token starting with it.
    assert (len(forced) < len(canonical)) == bool(extenders)


def test_the_rest_of_an_enum_value_and_the_closing_are_forced(
        jump: JumpForward, smollm2_tokenizer: Any,
        smollm2_grammar_info: GrammarTokenizerInfo) -> None:
    matcher = compile_schema(CARD, smollm2_grammar_info).matcher()
    jump.force(matcher, max_tokens=64)
    assert matcher.accept(encoder(smollm2_tokenizer)("deb")[0])  # the model picks "d…"
    rest = jump.force(matcher, max_tokens=64)
    assert smollm2_grammar_info.text_of(matcher.token_ids).startswith('{"card":"d')
    assert rest and matcher.is_complete
    assert json.loads(smollm2_grammar_info.text_of(matcher.token_ids)) == {"card": "debit"}


def test_nothing_is_forced_past_max_tokens_or_in_free_text(
        jump: JumpForward, smollm2_grammar_info: GrammarTokenizerInfo) -> None:
    matcher = compile_schema(SEND_MONEY, smollm2_grammar_info).matcher()
    assert jump.force(matcher, max_tokens=0) == ()
    assert len(jump.force(matcher, max_tokens=1)) == 1
    jump.force(matcher, max_tokens=64)
    assert jump.force(matcher, max_tokens=64) == ()  # inside the payee string: free


@pytest.mark.parametrize(("schema", "expected"), [
    ({"type": "string"}, {"type": "string", "maxLength": 8}),
    ({"type": ["string", "null"]}, {"type": ["string", "null"], "maxLength": 8}),
    ({"type": "string", "maxLength": 100}, {"type": "string", "maxLength": 100}),
    ({"type": "string", "enum": ["a"]}, {"type": "string", "enum": ["a"]}),
    ({"type": "string", "pattern": "^[a-z]+$"}, {"type": "string", "pattern": "^[a-z]{1,8}$"}),
    ({"type": "integer"}, {"type": "integer"}),
    ({"type": "object", "properties": {"a": {"type": "string"}},
      "$defs": {"d": {"type": "string"}}},
     {"type": "object", "properties": {"a": {"type": "string", "maxLength": 8}},
      "$defs": {"d": {"type": "string", "maxLength": 8}}}),
    ({"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "number"}]}},
     {"type": "array", "items": {"anyOf": [{"type": "string", "maxLength": 8},
                                           {"type": "number"}]}}),
])
def test_free_strings_get_the_cap_and_the_callers_schema_is_untouched(
        schema: dict[str, Any], expected: dict[str, Any]) -> None:
    before = json.dumps(schema)
    assert cap_string_lengths(schema, 8) == expected
    assert json.dumps(schema) == before


def test_a_capped_schema_compiles_and_bounds_the_string(
        smollm2_tokenizer: Any, smollm2_grammar_info: GrammarTokenizerInfo) -> None:
    matcher = compile_schema(cap_string_lengths(SEND_MONEY, 4), smollm2_grammar_info).matcher()
    for token in encoder(smollm2_tokenizer)('{"payee":"Asha'):
        assert matcher.accept(token)
    assert not matcher.accept(encoder(smollm2_tokenizer)("x")[0])  # a fifth character
    assert has_string_at_cap({"payee": "Asha", "amount": 5}, 4)
    assert not has_string_at_cap({"payee": "Ash", "amount": 5}, 4)


def accepts(info: GrammarTokenizerInfo, tokenizer: Any, schema: dict[str, Any],
            text: str) -> bool:
    matcher = compile_schema(schema, info).matcher()
    return all(matcher.accept(t) for t in encoder(tokenizer)(text)) and matcher.is_complete


@pytest.mark.parametrize(("fmt", "value"), [
    ("email", "asha.ramaswamy@bank.example.com"),
    ("uri", "https://bank.example.com/accounts"),
    ("hostname", "bank.example.com"),
])
def test_a_string_with_an_unbounded_format_still_ends_at_the_cap(
        smollm2_tokenizer: Any, smollm2_grammar_info: GrammarTokenizerInfo, fmt: str,
        value: str) -> None:
    # xgrammar ignores maxLength beside a format: without a bound of our own, a small model
    # wrote an e-mail address to the token cap (minutes on CPU, then a cut-off answer)
    schema = {"type": "object", "properties": {"x": {"type": "string", "format": fmt}},
              "required": ["x"]}
    capped = cap_string_lengths(schema, 40)
    compact = {"separators": (",", ":")}
    assert accepts(smollm2_grammar_info, smollm2_tokenizer, capped,
                   json.dumps({"x": value}, **compact))  # type: ignore[arg-type]
    endless = json.dumps({"x": "a" * 200}, **compact)[:-2]  # type: ignore[arg-type]
    assert not accepts(smollm2_grammar_info, smollm2_tokenizer, capped, endless + '"}')
    matcher = compile_schema(capped, smollm2_grammar_info).matcher()
    accepted = 0
    for token in encoder(smollm2_tokenizer)(endless):
        if not matcher.accept(token):
            break
        accepted += 1
    assert accepted < 60  # refused well before the token cap
    assert schema["properties"]["x"] == {"type": "string", "format": fmt}


def test_an_authors_max_length_beside_a_format_is_the_bound() -> None:
    email = {"type": "string", "format": "email", "maxLength": 20}
    assert cap_string_lengths(email, 64) == {"type": "string",
                                            "pattern": email_pattern(20)}
    uri = {"type": "string", "format": "uri", "maxLength": 200}
    assert cap_string_lengths(uri, 64) == {"type": "string", "maxLength": 200}


@pytest.mark.parametrize(("fmt", "value"), [("date", "2026-08-07"),
                                            ("uuid", "123e4567-e89b-12d3-a456-426614174000")])
def test_a_bounded_format_is_left_as_it_is(fmt: str, value: str) -> None:
    schema = {"type": "string", "format": fmt}
    assert cap_string_lengths(schema, 8) == schema  # the format bounds it already
