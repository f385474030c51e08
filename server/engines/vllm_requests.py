"""The vLLM engine's requests and what comes back: `SamplingParams` for a constraint and
sampling options, and a vLLM `RequestOutput` read as our `Generation` (usage, logprobs) or as
token steps with exact bytes for `option_scoring`. vLLM is imported only inside functions.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from stackroute.grammars.bounded import bounded_schema
from stackroute.runtime.usage import Usage
from stackroute.server.engines.base import (
    EMPTY_OBJECT_SCHEMA,
    Constraint,
    ConstraintKind,
    Generation,
    SamplingOptions,
    TokenLogprob,
)
from stackroute.server.engines.option_scoring import TokenStep, check_menu
from stackroute.server.engines.rendering import ChatRenderer


def sampling_params(constraint: Constraint | None, sampling: SamplingOptions, *,
                    end_of_turn_id: int, max_string_chars: int | None) -> Any:
    """vLLM's `SamplingParams` for one request (structured outputs for a constraint; numbers
    bounded and JSON strings without a `maxLength` capped at `max_string_chars`, as the
    transformers engine bounds them)."""
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    structured = None  # a new one each time: vLLM rewrites a choice into a grammar in place
    if constraint is not None:
        if constraint.kind is ConstraintKind.CHOICE:
            structured = StructuredOutputsParams(choice=list(check_menu(constraint.choices)))
        elif constraint.kind is ConstraintKind.REGEX:
            structured = StructuredOutputsParams(regex=constraint.pattern or "")
        else:
            schema = constraint.schema or EMPTY_OBJECT_SCHEMA
            structured = StructuredOutputsParams(json=bounded_schema(schema, max_string_chars))
    return SamplingParams(
        max_tokens=sampling.max_tokens, temperature=sampling.temperature,
        stop=list(sampling.stop) or None, seed=sampling.seed,
        logprobs=sampling.top_logprobs, structured_outputs=structured,
        stop_token_ids=[end_of_turn_id])


def generation_of(renderer: ChatRenderer, ids: Sequence[int], out: Any,
                  top_logprobs: int | None, started: float) -> Generation:
    """A finished `RequestOutput` as a `Generation`; `started` is the call's
    `time.perf_counter()` at its start (for `latency_ms`)."""
    completion = out.outputs[0]
    token_ids = list(completion.token_ids)
    cached = int(out.num_cached_tokens or 0)
    usage = Usage(model_calls=1, prompt_tokens=len(ids), prefill_tokens=len(ids) - cached,
                  cached_tokens=cached, generated_tokens=len(token_ids),
                  forward_passes=max(1, len(token_ids)),
                  latency_ms=(time.perf_counter() - started) * 1e3)
    finish = completion.finish_reason
    if finish not in ("stop", "length"):
        raise RuntimeError(f"vLLM ended a request with finish_reason {finish!r}")
    logprobs = None
    if top_logprobs is not None and completion.logprobs is not None:
        logprobs = tuple(_token_logprob(renderer, t, entry, top_logprobs)
                         for t, entry in zip(token_ids, completion.logprobs, strict=True))
    return Generation(text=completion.text, finish_reason=finish, usage=usage,
                      logprobs=logprobs)


def answer_steps(out: Any, vocab: Sequence[bytes]) -> list[TokenStep]:
    """Token steps with exact bytes (a byte-level token may be half a character); `vocab` is
    each token id's bytes."""
    completion = out.outputs[0]
    steps = []
    for token, entry in zip(completion.token_ids, completion.logprobs or (), strict=False):
        alternatives = tuple((vocab[t] if t < len(vocab) else b"", lp.logprob)
                             for t, lp in sorted(entry.items(), key=lambda kv: kv[1].rank))
        steps.append(TokenStep(vocab[token] if token < len(vocab) else b"",
                               entry[token].logprob, alternatives))
    return steps


def check_finished(text: str, constraint: Constraint) -> None:
    """A finished answer must satisfy its constraint; anything else is vLLM's bug or ours."""
    if constraint.kind is ConstraintKind.CHOICE and text not in constraint.choices:
        raise RuntimeError(f"vLLM's choice constraint produced {text!r}")
    if constraint.kind is ConstraintKind.JSON:
        try:
            json.loads(text)
        except ValueError as error:
            raise RuntimeError(f"vLLM's JSON constraint produced {text[:200]!r}") from error


def _token_logprob(renderer: ChatRenderer, token: int, entry: Mapping[int, Any],
                   k: int) -> TokenLogprob:
    ranked = sorted(entry.items(), key=lambda kv: -kv[1].logprob)[:k]
    top = tuple((lp.decoded_token or renderer.decode([t]), float(lp.logprob)) for t, lp in ranked)
    chosen = entry[token]
    return TokenLogprob(token=chosen.decoded_token or renderer.decode([token]),
                        logprob=float(chosen.logprob), top=top)
