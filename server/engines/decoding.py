"""One generation in the transformers engine: the prompt pass, then (masked step + forced
tokens) until the constraint finishes, a stop token or string appears, or `max_tokens` run out.

Forced tokens cost no pass of their own: where the grammar allows exactly one continuation
(JSON keys and punctuation, the rest of an enum value, the closing of an object), its tokens
are appended without sampling (`grammars/jump_forward.py`, in the tokenizer's own spelling)
and fed to the model in the next pass together with the sampled token before them; the
first ones go into the prompt's pass. When the grammar is complete after them, no pass is
run at all. `num_passes` against the tokens generated is what that saves.

Under greedy decoding a pass also carries a draft: the tokens that follow, in the prompt, the
text generated so far (`prompt_lookup.py`; argument values are mostly copied from the
request). The pass returns a row of logits per drafted token; the decoder picks along them
exactly as it would step by step (same masks, same forced text) and keeps the drafted tokens
while its picks agree, so the answer is the step-by-step answer (up to float rounding between
a one-token and a many-token pass) in fewer passes. The KV of refused draft tokens is cropped.

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
from stackroute.server.engines.prompt_lookup import PromptLookup


@dataclass
class DecodeOut:
    token_ids: list[int] = field(default_factory=list)
    text: str = ""
    finish_reason: str = "length"
    num_passes: int = 0
    num_prefill: int = 0
    num_cached: int = 0
    num_forced: int = 0  # tokens appended without sampling (jump-forward)
    num_drafted: int = 0  # drafted tokens the greedy pick agreed with (prompt lookup)
    logprobs: tuple[TokenLogprob, ...] | None = None


class Decoder:
    def __init__(self, runner: ModelRunner, *, decode: Callable[[Sequence[int]], str],
                 stop_ids: frozenset[int], vocab_size: int, prompt_ids: list[int],
                 matcher: ConstraintMatcher | None, sampling: SamplingOptions,
                 max_tokens: int, jump_forward: JumpForward | None = None,
                 lookup: PromptLookup | None = None,
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
        self.lookup = lookup  # None: no drafts
        self.on_tokens = on_tokens  # called with the answer's tokens so far after each pass
        self.out = DecodeOut()
        self.logprobs: list[TokenLogprob] = []
        self.generator = torch.Generator().manual_seed(sampling.seed or 0)

    def run(self) -> DecodeOut:
        out = self.out
        forced = self._force()
        first = self.runner.run_prompt(self.ids, extra=forced)
        kv = first.kv
        out.num_cached, out.num_passes = first.num_cached, first.num_passes
        out.num_prefill = len(self.ids) - first.num_cached
        self._take_forced(forced)
        self._emit()
        rows = [self._torch.from_numpy(first.logits[-1])]
        draft: tuple[int, ...] = ()
        while True:
            feed = self._advance(kv, rows, draft)
            self._emit()
            if feed is None or self._is_done():
                break  # decided without another pass
            draft = self._draft()
            rows = self._step(kv, [*feed, *draft], num_rows=len(draft) + 1)
        text = self.decode([t for t in out.token_ids if t not in self.stop_ids])
        for s in self.sampling.stop:
            cut = text.find(s)
            if cut >= 0:
                text = text[:cut]
        out.text = text
        out.logprobs = tuple(self.logprobs) if self.sampling.top_logprobs is not None else None
        return out

    def _advance(self, kv: Any, rows: Sequence[Any], draft: Sequence[int]) -> list[int] | None:
        """Pick along `rows` (row j holds the logits after `draft[:j]`, all of which are in
        `kv`), keeping drafted tokens while the pick agrees with them; crop the rest from
        `kv`. Returns the tokens to feed next (the first pick that was not drafted, or none,
        then what the grammar forces after it), or None when the generation has ended."""
        j = 0
        while True:
            if self._is_done():
                return None
            token, lp = self._pick(rows[j])
            if self.sampling.top_logprobs is not None:
                self.logprobs.append(lp)
            if not self._accept(token):
                return None
            if j < len(draft) and token == draft[j]:
                j += 1
                self.out.num_drafted += 1
                forced = self._force()  # the step-by-step loop would force here too
                if forced:
                    self._crop(kv, len(draft) - j)
                    self._take_forced(forced)
                    return list(forced)
                continue
            self._crop(kv, len(draft) - j)
            forced = self._force()
            self._take_forced(forced)
            return [token, *forced]

    def _is_done(self) -> bool:
        """True (with the finish reason set) when the answer is whole or the budget spent."""
        if self.matcher is not None and self.matcher.is_complete and self._only_stop_allowed():
            self.out.finish_reason = "stop"  # a whole answer, even if it filled max_tokens
            return True
        return len(self.out.token_ids) >= self.max_tokens

    def _accept(self, token: int) -> bool:
        """Append a picked token; False (with the finish reason set) when it ends the
        generation: a stop token, the grammar finished, or a stop string appeared."""
        if self.matcher is not None:
            self.matcher.accept(token)
            if self.matcher.is_finished:
                self.out.finish_reason = "stop"
                return False
        elif token in self.stop_ids:
            self.out.finish_reason = "stop"
            return False
        self.out.token_ids.append(token)
        if self._hit_stop_string():
            self.out.finish_reason = "stop"
            return False
        return True

    def _draft(self) -> tuple[int, ...]:
        """Tokens guessed from the prompt (greedy decoding only: a draft is kept only where
        the argmax agrees), cut at the first one the grammar refuses, at a stop token, and
        after the first one behind which the grammar forces text (the decoder forces it
        rather than drafting through it). The matcher is left as it was."""
        if self.lookup is None or self.sampling.temperature > 0:
            return ()
        budget = self.max_tokens - len(self.out.token_ids)
        guess = self.lookup.draft(self.decode(self.out.token_ids), max_tokens=budget - 1)
        matcher = self.matcher
        kept: list[int] = []
        for token in guess:
            if token in self.stop_ids or (matcher is not None and not matcher.accept(token)):
                break
            kept.append(token)
            if matcher is not None and matcher.jump_forward_string():
                break
        if matcher is not None:
            matcher.rollback(len(kept))
        return tuple(kept)

    def _crop(self, kv: Any, num_tokens: int) -> None:
        if num_tokens:
            kv.crop(-num_tokens)

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

    def _step(self, kv: Any, tokens: list[int], *, num_rows: int) -> Any:
        self.out.num_passes += 1
        return self.runner.step(kv, tokens, num_rows=num_rows)

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
            if self.sampling.top_p < 1.0:
                probs = _nucleus(torch, probs, self.sampling.top_p)
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


def _nucleus(torch: Any, probs: Any, top_p: float) -> Any:
    """`probs` [vocab] kept on the smallest set of most likely tokens whose mass reaches
    `top_p` (the most likely token always stays), the rest zeroed; multinomial renormalises."""
    sorted_probs, order = torch.sort(probs, descending=True)
    before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs  # mass ahead of each token
    sorted_probs[before >= top_p] = 0.0
    return torch.zeros_like(probs).scatter(0, order, sorted_probs)
