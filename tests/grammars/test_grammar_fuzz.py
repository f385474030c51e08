"""Seeded fuzzing: random schemas and random menus under random logits never yield invalid output.

Schemas: 200 random JSON schemas (nested objects, arrays, enums, ranges, lengths, anyOf), each
decoded under random logits on the real vocab and validated with jsonschema. Menus: 1,000
random menus (2-64 options, shared prefixes, unicode) decided under random logits and checked
against a brute-force constrained greedy decoder written from the option sequences alone.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable
from typing import Any

import jsonschema
import numpy as np
import pytest
from numpy.typing import NDArray
from stackroute.grammars.decode import FinishReason, greedy_decode
from stackroute.grammars.menu import CompiledMenu, compile_menus
from stackroute.grammars.schema import GrammarTokenizerInfo, compile_schema
from tokenizers import Tokenizer

NUM_SCHEMAS = 200
NUM_MENUS = 1000

KEY_NAMES = ["name", "id", "amount", "date", "名前", "café", "x y", "a_b", "count", "tags"]
STRING_VALUES = ["a", "Los Angeles", "数据", "🚀", "", "x\"y", "tab\tin"]


def random_schema(rng: random.Random, depth: int = 0) -> dict[str, Any]:
    scalar_kinds = ["string", "integer", "number", "boolean", "enum", "null", "const"]
    kinds = scalar_kinds + (["array", "object", "object", "anyOf"] if depth < 3 else [])
    kind = rng.choice(kinds)
    if kind == "string":
        schema: dict[str, Any] = {"type": "string"}
        if rng.random() < 0.5:
            schema["minLength"] = rng.randint(0, 3)
            schema["maxLength"] = schema["minLength"] + rng.randint(0, 8)
        return schema
    if kind in ("integer", "number"):
        schema = {"type": kind}
        if rng.random() < 0.5:
            low = rng.randint(-50, 50)
            schema["minimum"] = low
            schema["maximum"] = low + rng.randint(0, 100)
        return schema
    if kind == "boolean":
        return {"type": "boolean"}
    if kind == "null":
        return {"type": "null"}
    if kind == "enum":
        pool: list[Any] = [*STRING_VALUES, 0, 1, -3, 2.5, True, False, None]
        values = rng.sample(pool, rng.randint(1, 5))
        # jsonschema treats 1 == True and 0 == False as duplicates in enum.
        if any(v is True for v in values) and 1 in [v for v in values if v is not True]:
            values = [v for v in values if v is not True]
        if any(v is False for v in values) and 0 in [v for v in values if v is not False]:
            values = [v for v in values if v is not False]
        return {"enum": values}
    if kind == "const":
        return {"const": rng.choice([*STRING_VALUES, 7, None])}
    if kind == "array":
        schema = {"type": "array", "items": random_schema(rng, depth + 1)}
        if rng.random() < 0.5:
            schema["minItems"] = rng.randint(0, 2)
            schema["maxItems"] = schema["minItems"] + rng.randint(0, 3)
        return schema
    if kind == "anyOf":
        return {"anyOf": [random_schema(rng, depth + 1) for _ in range(rng.randint(2, 3))]}
    keys = rng.sample(KEY_NAMES, rng.randint(0, 4))
    schema = {
        "type": "object",
        "properties": {key: random_schema(rng, depth + 1) for key in keys},
    }
    required = [key for key in keys if rng.random() < 0.5]
    if required:
        schema["required"] = required
    return schema


def test_random_schemas_decode_to_valid_json(
    smollm2_grammar_info: GrammarTokenizerInfo, fake_model: Callable[..., Any]
) -> None:
    rng = random.Random(20240611)
    invalid: list[tuple[str, str]] = []
    num_stopped = 0
    for index in range(NUM_SCHEMAS):
        schema = random_schema(rng)
        matcher = compile_schema(schema, smollm2_grammar_info).matcher()
        # Weaker nudges towards closers give longer strings, arrays and more optional keys.
        boost = (3.0, 2.0, 1.0)[index % 3]
        model = fake_model(smollm2_grammar_info, seed=index, closing_boost=boost)
        result = greedy_decode(model, matcher, max_tokens=600)
        if result.finish_reason is not FinishReason.STOP:
            continue  # ran out of tokens: not an invalid output, but count it below
        num_stopped += 1
        try:
            jsonschema.validate(json.loads(result.text), schema)
        except (ValueError, jsonschema.ValidationError):
            invalid.append((json.dumps(schema, ensure_ascii=False), result.text))
    assert invalid == []
    assert num_stopped >= NUM_SCHEMAS * 0.95


# Stems that share prefixes at the byte and token level, and suffixes that extend them.
STEMS = [
    "pay", "payment", "payments", "get", "getWeather", "getWeatherForecast", "book", "booking",
    "数据", "数据查询", "café", "cafe", "emoji_🚀", "🚀", "x", "search", "searchFlights", "DONE",
    "BACK", "Ünïcödé", "data", "database",
]
SUFFIXES = ["", "", "_history", "s", "_v2", "Lookup", "查询", "🚀", "é", "2", "-x", ".y"]


def random_menu(rng: random.Random) -> list[str]:
    size = rng.randint(2, 64)
    names: set[str] = set()
    while len(names) < size:
        if rng.random() < 0.15:  # random unicode code points, no leading whitespace
            name = "".join(chr(rng.choice([rng.randint(33, 126), rng.randint(160, 0x2FFF),
                                           rng.randint(0x1F300, 0x1F6FF)]))
                           for _ in range(rng.randint(1, 6)))
            if name[0].isspace():
                continue
        else:
            name = rng.choice(STEMS) + rng.choice(SUFFIXES) + rng.choice(SUFFIXES)
        names.add(name)
    ordered = sorted(names)
    rng.shuffle(ordered)
    return ordered


class RandomLogits:
    """logits_at over a bank of random rows (a fresh 49k-wide row per node would dominate)."""

    def __init__(self, bank: NDArray[np.float32], seed: int) -> None:
        self.bank = bank
        self.seed = seed
        self.nodes: list[int] = []

    def __call__(self, node: int) -> NDArray[np.float32]:
        self.nodes.append(node)
        return self.bank[(node * 7919 + self.seed) % self.bank.shape[0]]


def reference_decide(
    menu: CompiledMenu, logits_at: Callable[[int], NDArray[np.float32]], bias: dict[str, float]
) -> tuple[str, dict[str, float]]:
    """Constrained greedy decoding from the option sequences alone, token by token."""
    node_of_prefix: dict[tuple[int, ...], int] = {(): -1}
    paths: list[tuple[int, ...]] = []
    for token, parent in zip(menu.flat_token_ids, menu.flat_parent, strict=True):
        paths.append((*(paths[parent] if parent >= 0 else ()), token))
        node_of_prefix[paths[-1]] = len(paths) - 1

    def allowed(prefix: tuple[int, ...]) -> list[int]:
        return sorted({s[len(prefix)] for s in menu.sequences if s[: len(prefix)] == prefix})

    # Model log-probs of every option: log-softmax over the allowed tokens at each step.
    model_logprobs = {}
    for option, sequence in zip(menu.options, menu.sequences, strict=True):
        total = 0.0
        for position, token in enumerate(sequence):
            tokens = allowed(sequence[:position])
            if len(tokens) > 1:
                row = logits_at(node_of_prefix[sequence[:position]]).astype(np.float64)
                scores = row[tokens]
                total += float(row[token] - np.logaddexp.reduce(scores))
        model_logprobs[option] = total
    tilted = {o: lp + bias.get(o, 0.0) for o, lp in model_logprobs.items()}
    log_z = float(np.logaddexp.reduce(list(tilted.values())))
    posterior = {o: v - log_z for o, v in tilted.items()}

    # Greedy walk: at each prefix take the token whose options carry the most tilted mass.
    prefix: tuple[int, ...] = ()
    while True:
        best_token, best_mass = -1, -math.inf
        for token in allowed(prefix):
            extended = (*prefix, token)
            mass = float(np.logaddexp.reduce([
                posterior[o] for o, s in zip(menu.options, menu.sequences, strict=True)
                if s[: len(extended)] == extended
            ]))
            if mass > best_mass:
                best_token, best_mass = token, mass
        prefix = (*prefix, best_token)
        if best_token == menu.end_token_id:
            return menu.options[menu.sequences.index(prefix)], posterior


@pytest.mark.parametrize("tokenizer_name", ["tiny", "smollm2"])
def test_random_menus_always_choose_an_option_exactly_as_greedy_decoding(
    request: pytest.FixtureRequest, tokenizer_name: str
) -> None:
    tokenizer: Tokenizer | object = request.getfixturevalue(f"{tokenizer_name}_tokenizer")
    end_id: int = request.getfixturevalue(f"{tokenizer_name}_end_id")
    vocab_size = 320 if tokenizer_name == "tiny" else 49152
    rng = random.Random(7)
    bank = np.random.default_rng(7).standard_normal((257, vocab_size)).astype(np.float32)
    menus = [random_menu(rng) for _ in range(NUM_MENUS // 2)]
    compiled = compile_menus(menus, tokenizer, end_token_id=end_id)
    mismatches = []
    for index, menu in enumerate(compiled):
        bias = (
            {o: rng.uniform(-2.0, 2.0) for o in rng.sample(menu.options, len(menu.options) // 2)}
            if index % 2
            else {}
        )
        logits_at = RandomLogits(bank, seed=index)
        choice = menu.decide(logits_at, option_bias=bias)
        assert logits_at.nodes == list(menu.branch_points)
        assert choice.choice in menu.options
        assert math.fsum(math.exp(v) for v in choice.option_logprobs.values()) == pytest.approx(1)
        assert choice.num_branch_points_on_path + choice.num_forced_tokens == len(
            menu.sequence(choice.choice)
        )
        expected_choice, expected_logprobs = reference_decide(menu, logits_at, bias)
        if choice.choice != expected_choice:
            mismatches.append((menu.options, choice.choice, expected_choice))
        assert choice.option_logprobs == pytest.approx(expected_logprobs, abs=1e-6)
    assert mismatches == []
