"""One generation in the transformers engine: the prompt pass, then (masked step + forced
tokens) until the constraint finishes, a stop token or string appears, or `max_tokens` run out.

Forced tokens cost no pass of their own: where the grammar allows exactly one continuation
(JSON keys and punctuation, the rest of an enum value, the closing of an object), its tokens
are appended without sampling (`grammars/jump_forward.py`, in the tokenizer's own spelling)
and fed to the model in the next pass together with the sampled token before them; the
first ones go into the prompt's pass. When the grammar is complete after them, no pass is
run at all. `num_passes` against the tokens generated is what that saves.

A `Decoder` is built per request with what it needs passed in (the model runner, the
tokenizer's decode, the stop ids, the vocab width, the jump-forward) and holds that request's
mutable state; the engine stays stateless between requests.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from stackroute.grammars.jump_forward import JumpForward
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
    num_forced: int = 0  # tokens appended without sampling (jump-forward)
    logprobs: tuple[TokenLogprob, ...] | None = None


class Decoder:
    def __init__(self, runner: ModelRunner, *, decode: Callable[[Sequence[int]], str],
                 stop_ids: frozenset[int], vocab_size: int, prompt_ids: list[int],
                 matcher: ConstraintMatcher | None, sampling: SamplingOptions,
                 max_tokens: int, jump_forward: JumpForward | None = None,
                 on_tokens: Callable[[Sequence[int]], None] | None = None) -> None:
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
        self.jump_forward = jump_forward  # None: every token is sampled
        self.on_tokens = on_tokens  # called with the answer's tokens so far after each pass
        self.out = DecodeOut()
        self.logprobs: list[TokenLogprob] = []
        self.generator = torch.Generator().manual_seed(sampling.seed or 0)

    def run(self) -> DecodeOut:
        torch = self._torch
        out, matcher = self.out, self.matcher
        forced = self._force()
        first = self.runner.run_prompt(self.ids, extra=forced)
        kv = first.kv
        out.num_cached, out.num_passes = first.num_cached, first.num_passes
        out.num_prefill = len(self.ids) - first.num_cached
        self._take_forced(forced)
        self._emit()
        logits = torch.from_numpy(first.logits[-1])
        generated = out.token_ids
        while True:
            if matcher is not None and matcher.is_complete and self._only_stop_allowed():
                out.finish_reason = "stop"  # a whole answer, even if it filled max_tokens
                break
            if len(generated) >= self.max_tokens:
                break
            token, lp = self._pick(logits)
            if self.sampling.top_logprobs is not None:
                self.logprobs.append(lp)
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
            forced = self._force()
            self._take_forced(forced)
            self._emit()
            if len(generated) >= self.max_tokens or (
                    matcher is not None and matcher.is_complete and self._only_stop_allowed()):
                continue  # decided at the top of the loop, without another pass
            logits = self._step(kv, [token, *forced])
        text = self.decode([t for t in generated if t not in self.stop_ids])
        for s in self.sampling.stop:
            cut = text.find(s)
            if cut >= 0:
                text = text[:cut]
        out.text = text
        out.logprobs = tuple(self.logprobs) if self.sampling.top_logprobs is not None else None
        return out

    def _emit(self) -> None:
        if self.on_tokens is not None and self.out.token_ids:
            self.on_tokens(self.out.token_ids)

    def _force(self) -> tuple[int, ...]:
        """The tokens the grammar forces next, accepted into the matcher (none without a
        constraint or a jump-forward)."""
        if self.matcher is None or self.jump_forward is None:
            return ()
        return self.jump_forward.force(self.matcher,
                                       max_tokens=self.max_tokens - len(self.out.token_ids))

    def _take_forced(self, forced: Sequence[int]) -> None:
        self.out.token_ids.extend(forced)
        self.out.num_forced += len(forced)
        if self.sampling.top_logprobs is not None:
            self.logprobs.extend(TokenLogprob(self.decode([t]), 0.0) for t in forced)

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
