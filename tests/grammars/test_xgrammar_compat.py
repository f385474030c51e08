"""grammars/xgrammar_compat.py: jump-forward tokens where xgrammar (0.2.8, vLLM's pin) has no
`find_jump_forward_tokens`. Against the real smollm2 tokenizer: on xgrammar 0.2.9+ the result
equals xgrammar's own at every step of several constrained walks; on 0.2.8 it spells the
forced text with tokens the matcher accepts."""

from __future__ import annotations

import numpy as np
import pytest
from stackroute.grammars.schema import GrammarTokenizerInfo, compile_regex, compile_schema
from stackroute.grammars.xgrammar_compat import greedy_jump_forward_tokens

SCHEMAS = [
    {"type": "object", "properties": {"payee": {"type": "string"},
                                      "amount": {"type": "number"}},
     "required": ["payee", "amount"], "additionalProperties": False},
    {"type": "object", "properties": {"trip": {"enum": ["outbound", "return"]},
                                      "days": {"type": "integer"}},
     "required": ["trip", "days"], "additionalProperties": False},
    {"type": "array", "items": {"enum": ["alpha_beta", "alpha_gamma"]}, "minItems": 2,
     "maxItems": 2},
]


def walk(matcher: object, info: GrammarTokenizerInfo, *, seed: int) -> list[tuple[int, ...]]:
    """The greedy jump-forward at each step of a random constrained walk (forced tokens
    accepted, else one random allowed token), up to 40 steps."""
    rng = np.random.default_rng(seed)
    seen = []
    for _ in range(40):
        if matcher.is_finished:  # type: ignore[attr-defined]
            break
        ours = greedy_jump_forward_tokens(matcher._matcher, info)  # type: ignore[attr-defined]
        seen.append(ours)
        real = getattr(matcher._matcher, "find_jump_forward_tokens", None)  # type: ignore[attr-defined]
        if real is not None:
            assert ours == tuple(int(t) for t in real()), info.text_of(ours)
        text = matcher.jump_forward_string()  # type: ignore[attr-defined]
        assert text.encode().startswith(b"".join(info.decoded_vocab[t] for t in ours))
        if ours:
            for token in ours:
                assert matcher.accept(token)  # type: ignore[attr-defined]
            continue
        allowed = np.flatnonzero(matcher.allowed_mask())  # type: ignore[attr-defined]
        assert matcher.accept(int(rng.choice(allowed)))  # type: ignore[attr-defined]
    return seen


@pytest.mark.parametrize("schema", SCHEMAS)
@pytest.mark.parametrize("seed", [0, 1])
def test_matches_xgrammar_on_schema_walks(schema: dict[str, object], seed: int,
                                          smollm2_grammar_info: GrammarTokenizerInfo) -> None:
    seen = walk(compile_schema(schema, smollm2_grammar_info).matcher(), smollm2_grammar_info,
                seed=seed)
    assert any(seen)  # something was forced: the comparison was not vacuous


def test_the_last_token_is_held_back_when_a_longer_token_extends_it(
        smollm2_grammar_info: GrammarTokenizerInfo) -> None:
    matcher = compile_regex(r"alpha_(beta|gamma)", smollm2_grammar_info).matcher()
    forced = greedy_jump_forward_tokens(matcher._matcher, smollm2_grammar_info)
    spelled = b"".join(smollm2_grammar_info.decoded_vocab[t] for t in forced)
    assert b"alpha_".startswith(spelled) and spelled != b"alpha_"
