"""Canonical tokenisation of option names against the real SmolLM2 tokenizer.

A menu answer is generated right after "<|im_start|>assistant\\n" and followed by <|im_end|>.
The trie uses each name's standalone tokens, so they must be the tokens the whole rendered turn
has in that position; otherwise the KV cache of a re-rendered prompt would not match.
"""

from __future__ import annotations

import random

import pytest
from stackroute.grammars.cache import tokenizer_fingerprint
from stackroute.grammars.menu import compile_menu, compile_menus
from stackroute.grammars.tokenizer import encode_batch
from tokenizers import Tokenizer

PREFIX = "<|im_start|>assistant\n"
SUFFIX = "<|im_end|>"
WORDS = [
    "get", "set", "search", "book", "flight", "hotel", "weather", "forecast", "pay", "payment",
    "payments", "history", "send", "money", "stock", "price", "convert", "currency", "calc",
    "BMI", "HTTP", "URL", "id", "v2", "2024", "x", "café", "naïve", "Zürich", "数据", "查询",
    "東京", "данные", "🚀", "emoji", "ÿ", "ß", "İstanbul", "ǅ", "ﬁ",
]
SEPARATORS = ["", "_", "-", ".", "/", ":", "'", " "]
HAND_PICKED = [
    "DONE", "BACK", "café_lookup", "数据查询", "emoji_🚀", "getBasketballScore",
    "calculateBMI", "HTTPRequest", "v2_api", "123", "a", "A-b_c", "'s", "'sfoo", "x's",
    "trailing ", "two  spaces", "tab\tinside", "new\nline", "x<|im_start|>y", "ÿÿÿ", "\u00a0nbsp",
]


def random_names(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    names = set()
    while len(names) < count:
        words = rng.choices(WORDS, k=rng.randint(1, 4))
        styled = [w.capitalize() if rng.random() < 0.3 else w for w in words]
        names.add(rng.choice(SEPARATORS).join(styled).strip())
    return sorted(names)


def in_context_tokens(tokenizer: object, names: list[str]) -> list[list[int]]:
    prefix = encode_batch(tokenizer, [PREFIX])[0]
    suffix = encode_batch(tokenizer, [SUFFIX])[0]
    whole = encode_batch(tokenizer, [PREFIX + name + SUFFIX for name in names])
    out = []
    for name, tokens in zip(names, whole, strict=True):
        assert tokens[: len(prefix)] == prefix, name
        assert tokens[len(tokens) - len(suffix) :] == suffix, name
        out.append(tokens[len(prefix) : len(tokens) - len(suffix)])
    return out


def test_standalone_tokens_equal_tokens_in_the_turn(smollm2_tokenizer: object) -> None:
    names = HAND_PICKED + random_names(3000, seed=7)
    standalone = encode_batch(smollm2_tokenizer, names)
    mismatched = [
        name
        for name, alone, inside in zip(
            names, standalone, in_context_tokens(smollm2_tokenizer, names), strict=True
        )
        if alone != inside
    ]
    assert mismatched == []


@pytest.mark.parametrize("name", ["\n\nnl", "\t", " ", "\nx"])
def test_names_starting_with_whitespace_break_it_and_are_rejected(
    smollm2_tokenizer: object, smollm2_end_id: int, name: str
) -> None:
    # The pre-tokenizer splits whitespace runs, so the template's "\n" and the name's leading
    # whitespace can become one token ("\n\n\n"...), changing even the prefix's last token.
    prefix, alone, suffix, whole = encode_batch(
        smollm2_tokenizer, [PREFIX, name, SUFFIX, PREFIX + name + SUFFIX]
    )
    if name != "\nx":  # "\n" + "\nx" happens to survive; rejected all the same
        assert prefix + alone + suffix != whole
    with pytest.raises(ValueError, match="starts with whitespace"):
        compile_menu([name, "DONE"], smollm2_tokenizer, end_token_id=smollm2_end_id)


def test_batch_encoding_is_tokenizer_encode(smollm2_tokenizer: object) -> None:
    names = HAND_PICKED + random_names(300, seed=11)
    one_by_one = [
        smollm2_tokenizer.encode(name, add_special_tokens=False)  # type: ignore[attr-defined]
        for name in names
    ]
    assert encode_batch(smollm2_tokenizer, names) == one_by_one
    backend = smollm2_tokenizer.backend_tokenizer  # type: ignore[attr-defined]
    assert encode_batch(backend, names) == one_by_one


def test_menu_sequences_on_the_real_tokenizer(
    smollm2_tokenizer: object, smollm2_end_id: int
) -> None:
    options = ["getBasketballScore", "getBasketballSchedule", "getBaseball", "DONE", "BACK"]
    menu = compile_menu(options, smollm2_tokenizer, end_token_id=smollm2_end_id)
    encode = smollm2_tokenizer.encode  # type: ignore[attr-defined]
    for option in options:
        expected = (*encode(option, add_special_tokens=False), smollm2_end_id)
        assert menu.sequence(option) == expected
    assert smollm2_end_id == 2
    assert smollm2_end_id not in menu.flat_token_ids
    assert menu.branch_points[0] == -1
    assert compile_menus([options], smollm2_tokenizer, end_token_id=smollm2_end_id) == [menu]


def test_fingerprint_is_stable_and_tells_tokenizers_apart(
    smollm2_tokenizer: object, tiny_tokenizer: Tokenizer
) -> None:
    backend = smollm2_tokenizer.backend_tokenizer  # type: ignore[attr-defined]
    rebuilt = Tokenizer.from_str(backend.to_str())
    fingerprint = tokenizer_fingerprint(smollm2_tokenizer)
    assert fingerprint == tokenizer_fingerprint(smollm2_tokenizer)  # cached
    assert fingerprint == tokenizer_fingerprint(rebuilt)  # same content, new object
    assert fingerprint != tokenizer_fingerprint(tiny_tokenizer)
    assert len(fingerprint) == 32
    assert int(fingerprint, 16) >= 0
