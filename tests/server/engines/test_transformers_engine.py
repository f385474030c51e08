"""Tier (c): the embedded CPU engine with the real SmolLM2-135M model.

The engine decides a menu in one forward pass over the prompt and the menu's token trie
under a tree attention mask. These tests hold it to the definition: the same decision and
probabilities as plain step-by-step greedy decoding restricted to the menu, with and without
the prefix cache.
"""

from __future__ import annotations

import functools
import json
import math
import random
from typing import Any

import jsonschema
import numpy as np
import pytest
import torch
from stackroute.grammars.container_caps import MAX_ITEMS
from stackroute.runtime.messages import Message
from stackroute.runtime.prompt import Prompt
from stackroute.runtime.usage import Usage
from stackroute.server.engines.base import Constraint, ContextOverflowError, SamplingOptions
from stackroute.server.engines.option_scoring import InvalidMenuError
from stackroute.server.engines.transformers_engine import TransformersEngine

pytestmark = pytest.mark.model

PROMPT = Prompt((
    Message("system", "You route requests. Answer with one option name."),
    Message("user", "Request: send 500 dollars to Asha\nOptions: pay, payment, "
                    "payments_history, refund, DONE"),
))
MENUS = [
    ["pay", "payment", "payments_history", "refund", "DONE"],
    ["search_web", "search_file", "search_email", "BACK"],
    ["café_lookup", "数据查询", "naive_search", "DONE"],
    ["a", "b"],
]


def reference_choice(engine: TransformersEngine, prompt: Prompt,
                     options: list[str]) -> tuple[str, dict[str, float]]:
    """Greedy decoding over the menu's trie one token at a time with full forward passes (no
    cache, no tree mask), and every option's probability as the product of the conditional
    probabilities renormalised over the allowed children along its path."""
    ids = engine.renderer.prompt_ids(prompt)
    end = engine.renderer.end_of_turn_id
    seqs = {o: (*tuple(engine.tokenizer.encode(o, add_special_tokens=False)), end)
            for o in options}

    @functools.cache
    def dist(prefix: tuple[int, ...]) -> dict[int, float]:
        allowed = sorted({s[len(prefix)] for s in seqs.values()
                          if s[: len(prefix)] == prefix and len(s) > len(prefix)})
        if len(allowed) == 1:
            return {allowed[0]: 0.0}
        with torch.inference_mode():
            logits = engine.model(input_ids=torch.tensor([ids + list(prefix)])).logits[0, -1]
        sub = logits[allowed].double()
        lp = torch.log_softmax(sub, dim=-1)
        return {t: float(v) for t, v in zip(allowed, lp, strict=True)}

    logprobs = {}
    for option, seq in seqs.items():
        logprobs[option] = sum(dist(seq[:i])[seq[i]] for i in range(len(seq)))
    prefix: tuple[int, ...] = ()
    while True:
        d = dist(prefix)
        best = max(d, key=lambda t: (d[t], -t))
        prefix += (best,)
        if best == end:
            break
    choice = next(o for o, s in seqs.items() if s == prefix)
    return choice, {o: math.exp(v) for o, v in logprobs.items()}


@pytest.mark.parametrize("options", MENUS)
def test_tree_pass_equals_step_by_step_greedy(engine: TransformersEngine,
                                              options: list[str]) -> None:
    result = engine.choose(PROMPT, options)
    choice, probabilities = reference_choice(engine, PROMPT, options)
    assert result.choice == choice
    assert set(result.probabilities) == set(options)
    assert sum(result.probabilities.values()) == pytest.approx(1.0, abs=1e-6)
    for option in options:
        assert result.probabilities[option] == pytest.approx(probabilities[option], abs=2e-4)
    assert result.usage.forward_passes == 1


def test_cache_on_and_off_give_identical_decisions(embedded_model: Any) -> None:
    on = TransformersEngine(loaded=embedded_model)
    off = TransformersEngine(loaded=embedded_model, is_cache_enabled=False)
    prompt = PROMPT
    for step, options in enumerate(MENUS):
        a, b = on.choose(prompt, options), off.choose(prompt, options)
        assert a.choice == b.choice
        for option in options:
            assert a.probabilities[option] == pytest.approx(b.probabilities[option], abs=1e-4)
        assert b.usage.cached_tokens == 0
        if step:  # every call after the first extends the previous prompt
            assert a.usage.cached_tokens > 0
            assert a.usage.prefill_tokens < b.usage.prefill_tokens
        prompt = prompt.extend(Message("assistant", a.choice),
                               Message("user", f"Result {step}. Next option?"))


def test_appended_prompt_prefills_only_the_new_messages(embedded_model: Any) -> None:
    engine = TransformersEngine(loaded=embedded_model)
    first = engine.choose(PROMPT, MENUS[0])
    longer = PROMPT.extend(Message("assistant", first.choice),
                           Message("user", "Done that. Next option?"))
    second = engine.choose(longer, MENUS[0])
    # The previous prompt is a token prefix of this one, so all of it is served from the cache.
    assert second.usage.cached_tokens == first.usage.prompt_tokens
    assert second.usage.prefill_tokens == (second.usage.prompt_tokens
                                           - first.usage.prompt_tokens)


def test_single_option_needs_no_model_call(engine: TransformersEngine) -> None:
    passes = engine.metrics()["forward_passes"]
    result = engine.choose(PROMPT, ["BACK"])
    assert result.choice == "BACK"
    assert result.probabilities == {"BACK": 1.0}
    assert result.usage == Usage()  # as in every engine: no model call, nothing counted
    assert engine.metrics()["forward_passes"] == passes


@pytest.mark.parametrize(("options", "problem"), [
    ([], "at least one option"), (["a", "a"], "unique"), ([" a", "b"], "whitespace")])
def test_a_menu_no_engine_can_answer_is_the_users_error(engine: TransformersEngine,
                                                        options: list[str],
                                                        problem: str) -> None:
    with pytest.raises(InvalidMenuError, match=problem):
        engine.choose(PROMPT, options)


SCHEMAS: list[dict[str, Any]] = [
    {"type": "object", "properties": {"payee": {"type": "string"},
                                      "amount": {"type": "number"}},
     "required": ["payee", "amount"]},
    {"type": "object", "properties": {"card": {"type": "string", "enum": ["debit", "credit"]}},
     "required": ["card"]},
    {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 9},
                                      "tags": {"type": "array", "items": {"type": "string"},
                                               "maxItems": 2},
                                      "ok": {"type": "boolean"}},
     "required": ["n", "ok"]},
    {"type": "object", "properties": {}},
]


@pytest.mark.parametrize("schema", SCHEMAS)
def test_json_generation_always_validates(engine: TransformersEngine,
                                          schema: dict[str, Any]) -> None:
    prompt = PROMPT.extend(Message("user", f"Arguments as JSON for: {json.dumps(schema)}"))
    out = engine.generate(prompt, constraint=Constraint.json(schema),
                          sampling=SamplingOptions(max_tokens=96))
    assert out.finish_reason == "stop", out.text
    jsonschema.validate(json.loads(out.text), schema)


@pytest.fixture(scope="module")
def step_by_step(embedded_model: Any) -> TransformersEngine:
    """The same model sampling every token, forced or not (no jump-forward, no drafts)."""
    return TransformersEngine(loaded=embedded_model, is_jump_forward=False, max_draft_tokens=0)


@pytest.mark.parametrize("schema", SCHEMAS)
def test_forced_tokens_cost_no_pass(engine: TransformersEngine,
                                    step_by_step: TransformersEngine,
                                    schema: dict[str, Any]) -> None:
    # The answers may differ: sampling every token lets the mask's non-canonical spellings
    # ('{' '"' 'pay' …) compete, which changes the model's context
    # (bench/experiments/jump_forward.py measures how often); both are schema-valid.
    prompt = PROMPT.extend(Message("user", f"Arguments as JSON for: {json.dumps(schema)}"))
    sampling = SamplingOptions(max_tokens=96)
    fast = engine.generate(prompt, constraint=Constraint.json(schema), sampling=sampling)
    slow = step_by_step.generate(prompt, constraint=Constraint.json(schema), sampling=sampling)
    for out in (fast, slow):
        assert out.finish_reason == "stop", out.text
        jsonschema.validate(json.loads(out.text), schema)
    assert slow.usage.forward_passes >= slow.usage.generated_tokens  # a pass per token
    assert fast.usage.forward_passes * 2 <= fast.usage.generated_tokens + 1
    if schema == {"type": "object", "properties": {}}:
        assert fast.usage.forward_passes == 1  # "{}" is forced whole: the prompt's pass only


def test_a_free_string_stops_at_the_cap_inside_a_whole_answer(embedded_model: Any) -> None:
    capped = TransformersEngine(loaded=embedded_model, max_string_chars=12)
    schema = {"type": "object", "properties": {"story": {"type": "string"},
                                               "n": {"type": "integer"}},
              "required": ["story", "n"]}
    prompt = PROMPT.extend(Message("user", "Write a very long story about a dragon in the "
                                           "story field, as JSON."))
    out = capped.generate(prompt, constraint=Constraint.json(schema),
                          sampling=SamplingOptions(max_tokens=96))
    assert out.finish_reason == "stop", out.text
    value = json.loads(out.text)
    jsonschema.validate(value, schema)
    assert len(value["story"]) <= 12
    assert out.is_string_capped is (len(value["story"]) == 12)
    assert schema["properties"]["story"] == {"type": "string"}  # the caller's, untouched


def test_a_schema_no_grammar_can_hold_names_its_leaf(engine: TransformersEngine) -> None:
    from stackroute.grammars.schema import InvalidGrammarError
    from stackroute.runtime.catalog import build_tree

    tree = build_tree({"name": "r", "children": [{"name": "photos", "description": "Photos.",
        "children": [{"name": "tag", "description": "Tag a photo.", "parameters": {
            "type": "object", "properties": {"tags": {
                "type": "array", "items": {"type": "string"}, "minItems": 5, "maxItems": 2}},
            "required": ["tags"]}}]}]})
    expected = (r"leaf photos/tag: its parameters: cannot compile JSON schema: "
                r"minItems is greater than maxItems: 5 > 2")
    with pytest.raises(InvalidGrammarError, match=expected):
        engine.prepare(tree)  # a catalog loaded into the service
    from stackroute.server.routing.options import DraftSource, MissingValues, RouterOptions
    from stackroute.server.routing.router import build_machine

    # the model writes the tags (an array of free words the request holds none of is asked
    # by default, and then nothing is compiled)
    plain = RouterOptions(recovery=None, speculation=DraftSource.OFF,
                          missing_values=MissingValues.WRITE)
    machine = build_machine(tree, engine, options=plain)
    state = machine.start("tag my photo with beach", at="photos")
    with pytest.raises(InvalidGrammarError, match=expected):  # a run that meets it
        for _ in range(4):
            machine.step(state)


def test_an_open_object_ends_inside_the_token_budget(engine: TransformersEngine) -> None:
    # Measured before the container caps: SmolLM2 wrote "metadata" keys for all 384 tokens
    # (finish "length", a cut-off answer); now the grammar closes it after MAX_ITEMS keys.
    schema = {"type": "object", "properties": {"metadata": {"type": "object"}},
              "required": ["metadata"]}
    prompt = Prompt((Message("system", "You fill tool arguments as JSON."),
                     Message("user", "Set the metadata for the upload. Arguments as JSON.")))
    out = engine.generate(prompt, constraint=Constraint.json(schema),
                          sampling=SamplingOptions(max_tokens=384))
    assert out.finish_reason == "stop", out.text
    value = json.loads(out.text)
    jsonschema.validate(value, schema)
    assert out.text.count('":') <= MAX_ITEMS + 1  # its keys and the one property
    assert schema["properties"]["metadata"] == {"type": "object"}  # the caller's, untouched


def test_regex_generation_matches(engine: TransformersEngine) -> None:
    out = engine.generate(PROMPT, constraint=Constraint.regex(r"[0-9]{4}-[0-9]{2}"),
                          sampling=SamplingOptions(max_tokens=16))
    assert out.finish_reason == "stop"
    assert len(out.text) == 7 and out.text[4] == "-"


def test_unconstrained_generation_stops_and_reports_logprobs(engine: TransformersEngine,
                                                            ) -> None:
    out = engine.generate(PROMPT, sampling=SamplingOptions(max_tokens=6, top_logprobs=2))
    assert out.finish_reason in ("stop", "length")
    assert out.usage.generated_tokens <= 6
    assert out.logprobs is not None and all(lp.logprob <= 0.0 for lp in out.logprobs)


def test_context_overflow_is_a_clear_error(engine: TransformersEngine) -> None:
    huge = Prompt((Message("user", "word " * (engine.info.max_context_tokens + 10)),))
    with pytest.raises(ContextOverflowError, match="context holds"):
        engine.choose(huge, ["a", "b"])


def random_menu(rng: random.Random) -> list[str]:
    stems = ["pay", "payment", "search", "get", "café", "数据", "x", "report", "send"]
    options: set[str] = set()
    while len(options) < rng.randint(2, 12):
        name = rng.choice(stems) + rng.choice(["", "_", "s", "_history", "ment", "2", "Q"])
        name += "".join(rng.choice("abcxyz_") for _ in range(rng.randint(0, 3)))
        options.add(name)
    return [*sorted(options), "DONE"]


def test_random_menus_always_answer_inside_the_menu(engine: TransformersEngine) -> None:
    # The full 1,000-menu run is the grammars fuzz test (random logits); here the real model
    # answers 16 random menus, the first checked against the step-by-step reference.
    rng = random.Random(7)
    for i in range(16):
        options = random_menu(rng)
        result = engine.choose(PROMPT, options)
        assert result.choice in options
        assert np.isclose(sum(result.probabilities.values()), 1.0)
        if i == 0:
            assert result.choice == reference_choice(engine, PROMPT, options)[0]


@pytest.fixture(scope="module")
def undrafted(embedded_model: Any) -> TransformersEngine:
    """Jump-forward without drafts from the prompt."""
    return TransformersEngine(loaded=embedded_model, max_draft_tokens=0)


COPY_SCHEMA = {"type": "object", "required": ["recipient", "memo"],
               "properties": {"recipient": {"type": "string"}, "memo": {"type": "string"}}}


@pytest.mark.parametrize("schema", [*SCHEMAS, COPY_SCHEMA])
def test_drafts_from_the_prompt_never_change_the_answer(engine: TransformersEngine,
                                                         undrafted: TransformersEngine,
                                                         schema: dict[str, Any]) -> None:
    prompt = PROMPT.extend(Message(
        "user", f"Arguments as JSON for: {json.dumps(schema)}\nRequest: send it to Asha "
                "Ramaswamy with the memo 'rent for the flat on Elm Street, December'"))
    sampling = SamplingOptions(max_tokens=96)
    drafted = engine.generate(prompt, constraint=Constraint.json(schema), sampling=sampling)
    plain = undrafted.generate(prompt, constraint=Constraint.json(schema), sampling=sampling)
    assert drafted.text == plain.text
    assert drafted.finish_reason == plain.finish_reason == "stop"
    assert drafted.usage.generated_tokens == plain.usage.generated_tokens
    assert drafted.usage.forward_passes <= plain.usage.forward_passes


def test_copied_values_take_fewer_passes_than_tokens(engine: TransformersEngine,
                                                    undrafted: TransformersEngine) -> None:
    prompt = Prompt((Message("system", "Fill in the tool's arguments as JSON, copying values "
                                       "from the request."),
                     Message("user", "Request: send it to Asha Ramaswamy with the memo 'rent "
                                     "for the flat on Elm Street, December'")))
    sampling = SamplingOptions(max_tokens=96)
    drafted = engine.generate(prompt, constraint=Constraint.json(COPY_SCHEMA), sampling=sampling)
    plain = undrafted.generate(prompt, constraint=Constraint.json(COPY_SCHEMA),
                               sampling=sampling)
    assert drafted.text == plain.text
    assert drafted.usage.forward_passes < plain.usage.forward_passes, drafted.text


def test_a_negative_draft_budget_is_refused(embedded_model: Any) -> None:
    with pytest.raises(ValueError, match="max_draft_tokens must be 0 or more, got -1"):
        TransformersEngine(loaded=embedded_model, max_draft_tokens=-1)
