"""The strongest hand-built peer: xgrammar + transformers, a greedy loop over one KV slot.

What a careful engineer writes in an afternoon: `GrammarMatcher` masks each step through a
token bitmask (`apply_token_bitmask_inplace`), the answer is the masked argmax, and the KV of
the previous call stays in one slot, so a prompt that shares a prefix with the last one runs
only its new tokens (the slot is cropped to the common prefix, as llama.cpp's slots are). A
token the grammar forces (exactly one allowed) is appended without a pass of its own and fed
with the next pass; when only stop tokens remain allowed, the answer is complete and no pass
runs. A menu is the grammar `root ::= "a" | "b" | …`; arguments are xgrammar's compact JSON
grammar of the same schema our engine compiles (strings capped the same way).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
from stackroute.bench.peers.system import CallOutcome
from stackroute.bench.peers.workload import (
    CallKind,
    ModelCall,
)
from stackroute.grammars.bounded import bounded_schema
from stackroute.grammars.string_caps import DEFAULT_MAX_STRING_CHARS
from stackroute.server.engines.kv_compat import kv_keyword

COMPACT_SEPARATORS = (",", ":")


def menu_ebnf(options: Sequence[str]) -> str:
    """>>> menu_ebnf(["a", "DONE"])
    'root ::= "a" | "DONE"'"""
    return "root ::= " + " | ".join(json.dumps(o) for o in options)


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class XgrammarSystem:
    name = "xgrammar"

    def __init__(self, loaded: Any, *, max_string_chars: int | None = DEFAULT_MAX_STRING_CHARS,
                 ) -> None:
        import torch
        import xgrammar as xgr

        self._torch, self._xgr = torch, xgr
        self.model = loaded.model
        self.tokenizer = loaded.tokenizer
        self.vocab_size = int(loaded.vocab_size)
        self.stop_ids = frozenset(int(t) for t in loaded.eos_token_ids)
        info = xgr.TokenizerInfo.from_huggingface(loaded.tokenizer, vocab_size=self.vocab_size,
                                                  stop_token_ids=sorted(self.stop_ids))
        self.compiler = xgr.GrammarCompiler(info)
        self.max_string_chars = max_string_chars
        self.bitmask = xgr.allocate_token_bitmask(1, self.vocab_size)
        self.grammars: dict[str, Any] = {}
        self._kv_keyword = kv_keyword(self.model)
        self.clear_cache()

    # -- compilation ---------------------------------------------------------------------------
    def grammar(self, call: ModelCall) -> Any:
        if call.kind is CallKind.DECISION:
            key = "menu:" + json.dumps(call.options)
            if key not in self.grammars:
                self.grammars[key] = self.compiler.compile_grammar(menu_ebnf(call.options))
            return self.grammars[key]
        schema = bounded_schema(call.schema or {}, self.max_string_chars)  # as ours does
        key = "json:" + json.dumps(schema, sort_keys=True)
        if key not in self.grammars:
            self.grammars[key] = self.compiler.compile_json_schema(
                json.dumps(schema, ensure_ascii=False, separators=COMPACT_SEPARATORS),
                any_whitespace=False, separators=COMPACT_SEPARATORS, strict_mode=True)
        return self.grammars[key]

    def prepare(self, calls: Sequence[ModelCall]) -> None:
        for call in calls:
            self.grammar(call)

    def clear_cache(self) -> None:
        from transformers import DynamicCache

        self.kv = DynamicCache(config=self.model.config)
        self.kv_ids: list[int] = []  # the tokens whose KV the slot holds

    # -- the loop --------------------------------------------------------------------------------
    def run(self, call: ModelCall) -> CallOutcome:
        max_tokens = call.max_tokens
        matcher = self._xgr.GrammarMatcher(self.grammar(call))
        ids = list(call.prompt_ids)
        reused = min(common_prefix_len(self.kv_ids, ids), len(ids) - 1)  # a pass needs 1 token
        if len(self.kv_ids) > reused:
            self.kv.crop(reused - len(self.kv_ids))  # a negative count: tokens to drop
        self.kv_ids = ids[:reused]
        pending = ids[reused:]  # tokens to feed with the next pass
        out: list[int] = []
        num_passes, finish = 0, "length"
        while len(out) < max_tokens:
            allowed = self._allowed(matcher)
            if allowed.size and self.stop_ids.issuperset(allowed.tolist()):
                finish = "stop"  # complete: only a stop token may follow; no pass for it
                break
            if allowed.size == 1:
                token = int(allowed[0])  # forced: rides with the next pass
            else:
                logits = self._forward(pending)
                num_passes += 1
                pending = []
                self._xgr.apply_token_bitmask_inplace(logits, self.bitmask)
                token = int(logits.argmax())
                if token in self.stop_ids:
                    finish = "stop"
                    break
            if not matcher.accept_token(token):
                raise RuntimeError(f"xgrammar refused token {token} it had allowed")  # a bug
            out.append(token)
            pending.append(token)
        text = str(self.tokenizer.decode(out))
        return CallOutcome(text=text, forward_passes=num_passes,
                           prefill_tokens=len(ids) - reused, generated_tokens=len(out),
                           finish_reason=finish)

    def _allowed(self, matcher: Any) -> np.ndarray:
        """The token ids the grammar allows next, from the bitmask (int32 words, bit k of
        word w is token 32 w + k)."""
        matcher.fill_next_token_bitmask(self.bitmask)
        bits = np.unpackbits(self.bitmask.numpy().view(np.uint8), bitorder="little")
        return np.flatnonzero(bits[: self.vocab_size])

    def _forward(self, tokens: Sequence[int]) -> Any:
        """One pass over `tokens` after the slot's KV; the last position's logits [1, vocab]."""
        torch = self._torch
        with torch.inference_mode():
            out = self.model(input_ids=torch.tensor([list(tokens)]),
                             **{self._kv_keyword: self.kv}, use_cache=True, logits_to_keep=1)
        self.kv_ids.extend(tokens)
        return out.logits[0, -1:].float()
