"""The transformers engine's forward passes over one model and its prefix KV cache.

`run_prompt` is the one way a prompt reaches the model, for a menu decision, a drafted path's
verification and a generation's prefill alike: look the prompt up in the prefix cache, prefill
long uncached heads in causal chunks, then one pass over the rest with any menu tries hung off
it (`tree_attention.py`), and store the prompt's KV (never a trie's) for the next call.
`run_levels` does the same for several prompts that share only a prefix (a prompt tree).
`step` is one decoding pass over tokens appended to a KV. Callers hold the engine's lock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from stackroute.server.engines.common import Counters
from stackroute.server.engines.kv_compat import kv_keyword
from stackroute.server.engines.prefix_cache import PrefixCache
from stackroute.server.engines.tree_attention import Branch, TrieLayout, levels_batch, tree_batch


@dataclass(frozen=True)
class PromptPass:
    """What `run_prompt` computed: float32 logits `[rows, vocab]` (the last input position's
    row when there are no branches; else per branch its root row then its trie nodes' rows),
    the KV of the prompt (the caller's to extend), how many prompt tokens
    came from the cache, the forward passes run, and the prompt tokens the model ran over
    (for a prompt tree, every level's uncached tokens, each shared one once)."""

    logits: np.ndarray[Any, Any]
    kv: Any
    num_cached: int
    num_passes: int
    num_prefilled: int


class ModelRunner:
    def __init__(self, model: Any, *, cache: PrefixCache, is_cache_enabled: bool,
                 prefill_chunk_tokens: int, counters: Counters) -> None:
        import torch

        self._torch = torch
        self.model = model
        self.cache = cache
        self.is_cache_enabled = is_cache_enabled
        self.prefill_chunk_tokens = prefill_chunk_tokens
        self.counters = counters  # forward_passes, prefill_tokens, cached_tokens
        self._kv_keyword = kv_keyword(model)  # `cache` or `past_key_values` (transformers <5.24)

    def run_prompt(self, prompt_ids: Sequence[int], branches: Sequence[Branch] = (), *,
                   extra: Sequence[int] = ()) -> PromptPass:
        """Run the uncached part of `prompt_ids` and the branches' tries, or `extra` tokens
        after the prompt (a generation's forced first tokens; not with branches). The cache
        may serve all but the last token of the first branch's prompt (of `prompt_ids +
        extra` when there is no branch: a pass needs one new token for its logits); then it
        holds the KV of `prompt_ids + extra`. `num_cached` counts prompt tokens only."""
        if branches and extra:
            raise ValueError("extra tokens and menu branches do not share a pass")  # our bug
        torch = self._torch
        ids = list(prompt_ids) + list(extra)
        first = branches[0].prompt_len if branches else len(ids)
        hit = self.cache.lookup(ids, max_tokens=first - 1) if self.is_cache_enabled else None
        num_cached = hit.num_tokens if hit is not None else 0
        kv = hit.kv if hit is not None and hit.kv is not None else self._new_kv()
        past, passes = self._prefill_chunks(ids, kv, num_cached, until=first)
        tail = ids[past:]
        with torch.inference_mode():
            if not branches:
                out = self.model(input_ids=torch.tensor([tail]), **{self._kv_keyword: kv},
                                 use_cache=True, logits_to_keep=1)
            else:
                batch = tree_batch(tail, past, branches)
                out = self.model(input_ids=torch.tensor([batch.token_ids]),
                                 **{self._kv_keyword: kv},
                                 attention_mask=batch.mask, position_ids=batch.position_ids,
                                 use_cache=True, logits_to_keep=torch.tensor(batch.keep_rows))
                kv.crop(-batch.num_tree_tokens)
        passes += 1
        logits = out.logits[0].float().numpy()
        if self.is_cache_enabled:
            self.cache.insert(ids, kv)
        num_cached = min(num_cached, len(prompt_ids))
        self.counters.add(forward_passes=passes, prefill_tokens=len(prompt_ids) - num_cached,
                          cached_tokens=num_cached)
        return PromptPass(logits=logits, kv=kv, num_cached=num_cached, num_passes=passes,
                          num_prefilled=len(prompt_ids) - num_cached)

    def run_levels(self, prompts: Sequence[Sequence[int]], menus: Sequence[TrieLayout],
                   ) -> PromptPass:
        """One pass over several prompts with a menu trie hung off each (`levels_batch`):
        the cache serves all but the last token of `prompts[0]` (a long uncached head is
        prefilled causally first), the other prompts see it up to where they leave it, and
        afterwards the cache holds `prompts[0]`'s KV, nothing of the others (their tokens
        are not a prefix of anything the KV holds). Logits rows as in `rows_by_branch`;
        `num_cached` counts `prompts[0]`'s tokens served from the cache."""
        torch = self._torch
        ids = list(prompts[0])
        hit = self.cache.lookup(ids, max_tokens=len(ids) - 1) if self.is_cache_enabled \
            else None
        num_cached = hit.num_tokens if hit is not None else 0
        kv = hit.kv if hit is not None and hit.kv is not None else self._new_kv()
        past, passes = self._prefill_chunks(ids, kv, num_cached, until=len(ids))
        batch = levels_batch(prompts, ids[:past], menus)
        with torch.inference_mode():
            out = self.model(input_ids=torch.tensor([batch.token_ids]),
                             **{self._kv_keyword: kv},
                             attention_mask=batch.mask, position_ids=batch.position_ids,
                             use_cache=True, logits_to_keep=torch.tensor(batch.keep_rows))
        kv.crop(-batch.num_tree_tokens)
        passes += 1
        if self.is_cache_enabled:
            self.cache.insert(ids, kv)
        num_prefilled = past - num_cached + len(batch.token_ids) \
            - sum(m.num_nodes for m in menus)
        self.counters.add(forward_passes=passes, prefill_tokens=num_prefilled,
                          cached_tokens=num_cached)
        return PromptPass(logits=out.logits[0].float().numpy(), kv=kv, num_cached=num_cached,
                          num_passes=passes, num_prefilled=num_prefilled)

    def step(self, kv: Any, token_ids: Sequence[int], *, num_rows: int = 1) -> Any:
        """One decoding pass over `token_ids` appended to `kv` (extended in place); the
        float32 logits `[num_rows, vocab]` (a torch tensor) of the last `num_rows` of them
        (a drafted tail's rows: each predicts the token after its own)."""
        torch = self._torch
        with torch.inference_mode():
            out = self.model(input_ids=torch.tensor([list(token_ids)]),
                             **{self._kv_keyword: kv}, use_cache=True, logits_to_keep=num_rows)
        self.counters.add(forward_passes=1)
        return out.logits[0, -num_rows:].float()

    def _prefill_chunks(self, ids: Sequence[int], kv: Any, start: int, *, until: int,
                        ) -> tuple[int, int]:
        """Causal prefill of `ids[start:]` in chunks while more than one chunk remains before
        `until`; returns the position reached and the passes run."""
        torch = self._torch
        pos, passes = start, 0
        while until - pos > self.prefill_chunk_tokens:
            chunk = list(ids[pos:pos + self.prefill_chunk_tokens])
            with torch.inference_mode():
                self.model(input_ids=torch.tensor([chunk]), **{self._kv_keyword: kv},
                           use_cache=True, logits_to_keep=1)
            pos += len(chunk)
            passes += 1
        return pos, passes

    def _new_kv(self) -> Any:
        from transformers import DynamicCache

        return DynamicCache(config=self.model.config)
