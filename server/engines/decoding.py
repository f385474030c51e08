"""One generation in the transformers engine: prefill, then (jump-forward | masked step) until
the constraint finishes, a stop token or string appears, or `max_tokens` run out.

A `Decoder` is built per request with what it needs passed in (the model runner, the
tokenizer's decode, the stop ids, the vocab width) and holds that request's mutable state; the
engine stays stateless between requests.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from stackroute.grammars.schema import ConstraintMatcher
from stackroute.server.engines.base import SamplingOptions, TokenLogprob
from stackroute.server.engines.model_runner import ModelRunner


@dataclass
class DecodeOut:
    token_ids: list[int] = field(default_factory=list)
    text: str = ""
    finish_reason: str = "length"
    num_passes: int = 0
    num_prefill: int = 0
    num_cached: int = 0
    logprobs: tuple[TokenLogprob, ...] | None = None


class Decoder:
    def __init__(self, runner: ModelRunner, *, decode: Callable[[Sequence[int]], str],
                 stop_ids: frozenset[int], vocab_size: int, prompt_ids: list[int],
                 matcher: ConstraintMatcher | None, sampling: SamplingOptions,
                 max_tokens: int) -> None:
        import torch

        self._torch = torch
        self.runner = runner
        self.decode = decode
        self.stop_ids = stop_ids
        self.vocab_size = vocab_size
        self.ids = prompt_ids
        self.matcher = matcher
        self.sampling = sampling
        self.max_tokens = max_tokens
        self.out = DecodeOut()
        self.generator = torch.Generator().manual_seed(sampling.seed or 0)

    def run(self) -> DecodeOut:
        torch = self._torch
        out = self.out
        first = self.runner.run_prompt(self.ids)
        kv = first.kv
        out.num_cached, out.num_passes = first.num_cached, first.num_passes
        out.num_prefill = len(self.ids) - first.num_cached
        logits = torch.from_numpy(first.logits[-1])
        logprobs: list[TokenLogprob] = []
        generated = out.token_ids
        matcher = self.matcher
        while len(generated) < self.max_tokens:
            if matcher is not None:
                if matcher.is_complete and self._only_stop_allowed():
                    out.finish_reason = "stop"
                    break
                forced = list(matcher.jump_forward_tokens())
                if forced:
                    forced = forced[: self.max_tokens - len(generated)]
                    for t in forced:
                        matcher.accept(t)
                        if self.sampling.top_logprobs is not None:
                            logprobs.append(TokenLogprob(self.decode([t]), 0.0))
                    generated.extend(forced)
                    logits = self._step(kv, forced)
                    continue
            token, lp = self._pick(logits)
            if self.sampling.top_logprobs is not None:
                logprobs.append(lp)
            if matcher is not None:
                matcher.accept(token)
                if matcher.is_finished:
                    out.finish_reason = "stop"
                    break
            elif token in self.stop_ids:
                out.finish_reason = "stop"
                break
            generated.append(token)
            if self._hit_stop_string():
                out.finish_reason = "stop"
                break
            if len(generated) >= self.max_tokens:
                break
            logits = self._step(kv, [token])
        text = self.decode([t for t in generated if t not in self.stop_ids])
        for s in self.sampling.stop:
            cut = text.find(s)
            if cut >= 0:
                text = text[:cut]
        out.text = text
        out.logprobs = tuple(logprobs) if self.sampling.top_logprobs is not None else None
        return out

    def _step(self, kv: Any, tokens: list[int]) -> Any:
        self.out.num_passes += 1
        return self.runner.step(kv, tokens)

    def _only_stop_allowed(self) -> bool:
        if self.matcher is None:
            raise RuntimeError("no constraint to ask")  # our bug
        allowed = np.flatnonzero(self.matcher.allowed_mask())
        return bool(len(allowed)) and all(int(t) in self.stop_ids for t in allowed)

    def _pick(self, logits: Any) -> tuple[int, TokenLogprob]:
        torch = self._torch
        logits = logits[: self.vocab_size].clone()
        if self.matcher is not None:
            allowed = torch.from_numpy(self.matcher.allowed_mask()[: logits.shape[0]].copy())
            logits[~allowed] = -math.inf
        logp = torch.log_softmax(logits, dim=-1)
        if self.sampling.temperature > 0:
            probs = torch.softmax(logits / self.sampling.temperature, dim=-1)
            token = int(torch.multinomial(probs, 1, generator=self.generator).item())
        else:
            token = int(torch.argmax(logits).item())
        k = self.sampling.top_logprobs or 0
        top: tuple[tuple[str, float], ...] = ()
        if k:
            values, indices = torch.topk(logp, k)
            top = tuple((self.decode([int(i)]), float(v))
                        for v, i in zip(values, indices, strict=True) if v > -math.inf)
        return token, TokenLogprob(self.decode([token]), float(logp[token]), top)

    def _hit_stop_string(self) -> bool:
        if not self.sampling.stop:
            return False
        tail = self.decode(self.out.token_ids[-16:])
        return any(s in tail for s in self.sampling.stop)
