"""The embedded CPU engine: a transformers causal LM, a prefix KV cache shaped like the call
stack, menu choices over a token trie in one forward pass, and xgrammar-constrained generation.

A menu decision is one forward pass: the prompt's new tokens and every non-terminal node of the
menu's token trie go in together, the trie tokens under a tree attention mask (each attends to
the prompt and to its own trie ancestors). The last prompt position gives the distribution at
the trie root and each trie node the distribution of its children, so the greedy choice and
every option's probability come from that one pass. The KV of the trie tokens is then cropped
off and the prompt's KV stored in the prefix cache for the next call.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from stackroute.grammars.cache import ConstraintCache, tokenizer_fingerprint
from stackroute.grammars.menu import CompiledMenu, compile_menu
from stackroute.grammars.schema import (
    CompiledGrammar,
    ConstraintMatcher,
    compile_regex,
    compile_schema,
    grammar_tokenizer_info,
)
from stackroute.runtime.tree import CapabilityTree
from stackroute.runtime.usage import Usage
from stackroute.server.engines.base import (
    Constraint,
    ConstraintKind,
    ContextOverflowError,
    EngineInfo,
    Generation,
    MenuResult,
    PrepareStats,
    PromptInput,
    SamplingOptions,
    TokenLogprob,
)
from stackroute.server.engines.menu_variants import menu_variants
from stackroute.server.engines.model_store import LoadedModel, load_model, resolve_model
from stackroute.server.engines.prefix_cache import PrefixCache
from stackroute.server.engines.rendering import ChatRenderer
from stackroute.server.engines.verification import PathLayoutError, PathLevel

log = logging.getLogger(__name__)

DEFAULT_CACHE_BYTES = 1 << 30  # 1 GiB of KV: about 23k tokens of SmolLM2-135M in float32
DEFAULT_PREFILL_CHUNK = 1024  # tokens per forward pass; bounds attention memory on long prompts


class TransformersEngine:
    def __init__(self, *, model: str | None = None, dtype: str = "float32",
                 cache_bytes: int = DEFAULT_CACHE_BYTES, is_cache_enabled: bool = True,
                 num_threads: int | None = None,
                 prefill_chunk_tokens: int = DEFAULT_PREFILL_CHUNK,
                 loaded: LoadedModel | None = None) -> None:
        import torch

        self._torch = torch
        self.loaded = loaded or load_model(resolve_model(model), dtype=dtype,
                                           num_threads=num_threads)
        self.model = self.loaded.model
        self.tokenizer = self.loaded.tokenizer
        self.renderer = ChatRenderer(self.tokenizer)
        self.info = EngineInfo(engine="transformers", model=self.loaded.name,
                               max_context_tokens=self.loaded.max_context_tokens,
                               dtype=self.loaded.dtype)
        self.cache = PrefixCache(max_bytes=cache_bytes)
        self.is_cache_enabled = is_cache_enabled
        self.prefill_chunk_tokens = prefill_chunk_tokens
        self.fingerprint = tokenizer_fingerprint(self.tokenizer)
        self.grammar_info = grammar_tokenizer_info(self.tokenizer, self.loaded.vocab_size)
        self.menus: ConstraintCache[CompiledMenu] = ConstraintCache()
        self.grammars: ConstraintCache[CompiledGrammar] = ConstraintCache()
        self._stop_ids = frozenset(self.loaded.eos_token_ids) | {self.renderer.end_of_turn_id}
        self._lock = threading.Lock()  # model steps are serialised; requests queue here
        self._counters = {"forward_passes": 0.0, "prefill_tokens": 0.0, "cached_tokens": 0.0,
                          "menu_calls": 0.0, "generate_calls": 0.0}

    # -- compilation -------------------------------------------------------------------------
    def compiled_menu(self, options: Sequence[str]) -> CompiledMenu:
        key = ("menu", tuple(options))
        return self.menus.get_or_compile(key, self.fingerprint, lambda: compile_menu(
            options, self.tokenizer, end_token_id=self.renderer.end_of_turn_id))

    def compiled_grammar(self, constraint: Constraint) -> CompiledGrammar:
        if constraint.kind is ConstraintKind.JSON:
            schema = constraint.schema or {"type": "object"}
            import json
            key = ("json", json.dumps(schema, sort_keys=True))
            return self.grammars.get_or_compile(
                key, self.fingerprint, lambda: compile_schema(schema, self.grammar_info))
        if constraint.kind is ConstraintKind.REGEX:
            pattern = constraint.pattern or ""
            return self.grammars.get_or_compile(
                ("regex", pattern), self.fingerprint,
                lambda: compile_regex(pattern, self.grammar_info))
        raise ValueError(f"no grammar for constraint kind {constraint.kind}")

    def prepare(self, tree: CapabilityTree) -> PrepareStats:
        """Compile each router's menus (with DONE, and with BACK) and each leaf's schema."""
        started = time.perf_counter()
        menus = menu_variants(tree)
        for menu in menus:
            self.compiled_menu(menu)
        num_menus, num_schemas = len(menus), 0
        for leaf in tree.leaves():
            self.compiled_grammar(Constraint.json(leaf.parameters or {"type": "object",
                                                                      "properties": {}}))
            num_schemas += 1
        return PrepareStats(num_menus=num_menus, num_schemas=num_schemas,
                            compile_ms=(time.perf_counter() - started) * 1e3)

    # -- the protocol --------------------------------------------------------------------------
    def count_tokens(self, prompt: PromptInput) -> int:
        return len(self.renderer.prompt_ids(prompt))

    def choose(self, prompt: PromptInput, options: Sequence[str], *,
               option_bias: Mapping[str, float] | None = None) -> MenuResult:
        started = time.perf_counter()
        menu = self.compiled_menu(options)
        ids = self.renderer.prompt_ids(prompt)
        self._check_context(len(ids) + max(len(s) for s in menu.sequences))
        if not menu.branch_points:  # one option: nothing to decide, no model call
            only = menu.options[0]
            return MenuResult(choice=only, probabilities={only: 1.0}, margin=math.inf,
                              usage=Usage(model_calls=1, prompt_tokens=len(ids),
                                          generated_tokens=len(menu.sequences[0]),
                                          latency_ms=(time.perf_counter() - started) * 1e3))
        with self._lock:
            logits, _, num_cached, passes = self._forward_prompt(ids, menu)
        num_new = len(ids) - num_cached
        rows = {-1: 0} | {i: 1 + i for i in range(menu.num_nodes)}
        choice = menu.decide(lambda node: logits[rows[node]], option_bias=option_bias)
        self._counters["menu_calls"] += 1
        usage = Usage(model_calls=1, prompt_tokens=len(ids), prefill_tokens=num_new,
                      cached_tokens=num_cached,
                      generated_tokens=len(menu.sequence(choice.choice)),
                      forward_passes=passes, latency_ms=(time.perf_counter() - started) * 1e3)
        probabilities = {o: math.exp(lp) for o, lp in choice.option_logprobs.items()}
        return MenuResult(choice=choice.choice, probabilities=probabilities,
                          margin=choice.margin, usage=usage)

    def verify_path(self, levels: Sequence[PathLevel]) -> list[MenuResult]:
        """Every level's constrained choice under its drafted context, from one forward pass
        (plus causal prefill chunks of a long uncached head): the last level's prompt runs
        causally and each level's menu trie hangs off that level's last prompt position under
        the tree mask, so level k sees exactly the tokens step-by-step routing would show it
        had the model answered the drafted names above it."""
        if not levels:
            raise ValueError("verify_path needs at least one level")
        started = time.perf_counter()
        menus = [self.compiled_menu(level.options) for level in levels]
        prompts = [self.renderer.prompt_ids(level.prompt) for level in levels]
        for k, (level, menu) in enumerate(zip(levels[:-1], menus, strict=False)):
            if level.draft not in menu.options:
                raise ValueError(f"level {k}: draft {level.draft!r} is not one of "
                                 f"{list(menu.options)}")
            expected = prompts[k] + list(menu.sequence(level.draft))
            if prompts[k + 1][:len(expected)] != expected:
                raise PathLayoutError(
                    f"level {k + 1}'s prompt does not extend level {k}'s prompt and the "
                    f"answer {level.draft!r}; the path cannot be verified in one pass")
        self._check_context(len(prompts[-1]) + max(len(s) for m in menus for s in m.sequences))
        with self._lock:
            rows, num_cached, passes = self._forward_path(prompts, menus)
        self._counters["menu_calls"] += 1
        results = []
        for k, (ids, menu, level_rows) in enumerate(zip(prompts, menus, rows, strict=True)):
            choice = menu.decide(lambda node, r=level_rows: r[node])  # type: ignore[misc]
            usage = Usage(prompt_tokens=len(ids),
                          generated_tokens=len(menu.sequence(choice.choice)))
            if k == 0:
                usage = usage + Usage(
                    model_calls=1, prefill_tokens=len(prompts[-1]) - num_cached,
                    cached_tokens=num_cached, forward_passes=passes,
                    latency_ms=(time.perf_counter() - started) * 1e3)
            results.append(MenuResult(
                choice=choice.choice,
                probabilities={o: math.exp(lp) for o, lp in choice.option_logprobs.items()},
                margin=choice.margin, usage=usage))
        return results

    def generate(self, prompt: PromptInput, *, constraint: Constraint | None = None,
                 sampling: SamplingOptions | None = None) -> Generation:
        sampling = sampling or SamplingOptions()
        if constraint is not None and constraint.kind is ConstraintKind.CHOICE:
            return self._generate_choice(prompt, constraint.choices)
        started = time.perf_counter()
        matcher = None if constraint is None else self.compiled_grammar(constraint).matcher()
        ids = self.renderer.prompt_ids(prompt)
        self._check_context(len(ids) + 1)
        max_tokens = min(sampling.max_tokens, self.info.max_context_tokens - len(ids))
        with self._lock:
            out = _Decoder(self, ids, matcher, sampling, max_tokens).run()
        self._counters["generate_calls"] += 1
        usage = Usage(model_calls=1, prompt_tokens=len(ids), prefill_tokens=out.num_prefill,
                      cached_tokens=out.num_cached, generated_tokens=len(out.token_ids),
                      forward_passes=out.num_passes,
                      latency_ms=(time.perf_counter() - started) * 1e3)
        return Generation(text=out.text, finish_reason=out.finish_reason, usage=usage,
                          logprobs=out.logprobs)

    def metrics(self) -> dict[str, float]:
        stats = self.cache.stats()
        return {**self._counters, "cache_hit_rate": stats.hit_rate,
                "cache_bytes": float(stats.bytes_held),
                "cache_evictions": float(stats.num_evictions),
                "menu_compile_ms": self.menus.compile_ms_total,
                "grammar_compile_ms": self.grammars.compile_ms_total}

    # -- internals -----------------------------------------------------------------------------
    def _generate_choice(self, prompt: PromptInput, choices: Sequence[str]) -> Generation:
        result = self.choose(prompt, choices)
        ranked = sorted(result.probabilities.items(), key=lambda kv: -kv[1])
        top = tuple((o, math.log(max(p, 1e-300))) for o, p in ranked)
        lp = TokenLogprob(token=result.choice,
                          logprob=math.log(max(result.probabilities[result.choice], 1e-300)),
                          top=top)
        return Generation(text=result.choice, finish_reason="stop", usage=result.usage,
                          logprobs=(lp,))

    def _check_context(self, num_tokens: int) -> None:
        if num_tokens > self.info.max_context_tokens:
            raise ContextOverflowError(
                f"prompt needs {num_tokens} tokens; the model's context holds "
                f"{self.info.max_context_tokens}")

    def _forward_prompt(self, ids: Sequence[int], menu: CompiledMenu | None,
                        ) -> tuple[np.ndarray[Any, Any], Any, int, int]:
        """Run the uncached part of `ids` (plus the menu trie). Return the logits of the last
        prompt position and of every trie node as float32 numpy `[1 + trie, vocab]`, the KV of
        `ids` (the caller's to extend), the cached length and the forward passes run.

        The prefix cache is updated with the KV of `ids` (never of trie tokens)."""
        torch = self._torch
        hit = self.cache.lookup(ids, max_tokens=len(ids) - 1) if self.is_cache_enabled else None
        num_cached = hit.num_tokens if hit is not None else 0
        kv = hit.kv if hit is not None and hit.kv is not None else self._new_kv()
        # Chunks before the last one: plain causal prefill.
        past, passes = self._prefill_chunks(ids, kv, num_cached, until=len(ids))
        new = list(ids[past:])
        with torch.inference_mode():
            if menu is None:
                out = self.model(input_ids=torch.tensor([new]), cache=kv,
                                 use_cache=True, logits_to_keep=1)
            else:
                tokens, mask, positions = _tree_inputs(new, past, len(ids), menu)
                out = self.model(input_ids=torch.tensor([tokens]), cache=kv,
                                 attention_mask=mask, position_ids=positions, use_cache=True,
                                 logits_to_keep=menu.num_nodes + 1)
                kv.crop(-menu.num_nodes)
        passes += 1
        logits = out.logits[0].float().numpy()
        if self.is_cache_enabled:
            self.cache.insert(ids, kv)
        self._counters["forward_passes"] += passes
        self._counters["prefill_tokens"] += len(ids) - num_cached
        self._counters["cached_tokens"] += num_cached
        return logits, kv, num_cached, passes

    def _forward_path(self, prompts: Sequence[Sequence[int]], menus: Sequence[CompiledMenu],
                      ) -> tuple[list[dict[int, np.ndarray[Any, Any]]], int, int]:
        """Run the last prompt (uncached part) with every level's trie attached after its own
        prompt. Returns per level the logits rows by trie node (`-1`: the level's last prompt
        position), the cached length and the passes run. The prefix cache gets the last
        prompt's KV, so the frames of an accepted path find their prefixes cached."""
        torch = self._torch
        main, first = prompts[-1], len(prompts[0])
        hit = self.cache.lookup(main, max_tokens=first - 1) if self.is_cache_enabled else None
        num_cached = hit.num_tokens if hit is not None else 0
        kv = hit.kv if hit is not None and hit.kv is not None else self._new_kv()
        past, passes = self._prefill_chunks(main, kv, num_cached, until=first)
        tail = list(main[past:])
        n_tail, n_tries = len(tail), sum(m.num_nodes for m in menus)
        q = n_tail + n_tries
        mask = torch.zeros((1, 1, q, past + q), dtype=torch.bool)
        mask[..., :past] = True
        mask[0, 0, :n_tail, past:past + n_tail] = torch.tril(
            torch.ones(n_tail, n_tail, dtype=torch.bool))
        tokens, positions, keep = list(tail), list(range(past, past + n_tail)), []
        offset = n_tail
        for ids, menu in zip(prompts, menus, strict=True):
            end, n = len(ids), menu.num_nodes
            mask[0, 0, offset:offset + n, past:end] = True  # the level's prompt, no further
            mask[0, 0, offset:offset + n, past + offset:past + offset + n] = torch.from_numpy(
                np.array(menu.ancestor_matrix(), dtype=np.bool_))
            tokens.extend(menu.flat_token_ids)
            positions.extend(end + d - 1 for d in menu.flat_depth)
            keep.append(end - 1 - past)
            keep.extend(range(offset, offset + n))
            offset += n
        with torch.inference_mode():
            out = self.model(input_ids=torch.tensor([tokens]), cache=kv, attention_mask=mask,
                             position_ids=torch.tensor([positions]), use_cache=True,
                             logits_to_keep=torch.tensor(keep))
            kv.crop(-n_tries)
        passes += 1
        logits = out.logits[0].float().numpy()
        rows: list[dict[int, np.ndarray[Any, Any]]] = []
        at = 0
        for menu in menus:
            rows.append({-1: logits[at]} | {i: logits[at + 1 + i] for i in range(menu.num_nodes)})
            at += 1 + menu.num_nodes
        if self.is_cache_enabled:
            self.cache.insert(main, kv)
        self._counters["forward_passes"] += passes
        self._counters["prefill_tokens"] += len(main) - num_cached
        self._counters["cached_tokens"] += num_cached
        return rows, num_cached, passes

    def _prefill_chunks(self, ids: Sequence[int], kv: Any, start: int, *, until: int,
                        ) -> tuple[int, int]:
        """Causal prefill of `ids[start:]` in chunks while more than one chunk remains before
        `until`; returns the position reached and the passes run."""
        torch = self._torch
        pos, passes = start, 0
        while until - pos > self.prefill_chunk_tokens:
            chunk = list(ids[pos:pos + self.prefill_chunk_tokens])
            with torch.inference_mode():
                self.model(input_ids=torch.tensor([chunk]), cache=kv, use_cache=True,
                           logits_to_keep=1)
            pos += len(chunk)
            passes += 1
        return pos, passes

    def _new_kv(self) -> Any:
        from transformers import DynamicCache

        return DynamicCache(config=self.model.config)


def _tree_inputs(new: list[int], past: int, prompt_len: int, menu: CompiledMenu,
                 ) -> tuple[list[int], Any, Any]:
    """Input ids, the 4D bool attention mask `[1, 1, q, past + q]` and position ids `[1, q]`
    for the prompt's new tokens followed by the menu's flattened trie."""
    import torch

    n_new, n_tree = len(new), menu.num_nodes
    q = n_new + n_tree
    mask = torch.zeros((1, 1, q, past + q), dtype=torch.bool)
    mask[..., :past] = True
    mask[0, 0, :n_new, past:past + n_new] = torch.tril(torch.ones(n_new, n_new, dtype=torch.bool))
    mask[0, 0, n_new:, past:past + n_new] = True
    ancestors = np.array(menu.ancestor_matrix(), dtype=np.bool_)  # writable copy for torch
    mask[0, 0, n_new:, past + n_new:] = torch.from_numpy(ancestors)
    positions = list(range(past, past + n_new)) + [prompt_len + d - 1 for d in menu.flat_depth]
    return new + list(menu.flat_token_ids), mask, torch.tensor([positions])


class _DecodeOut:
    def __init__(self) -> None:
        self.token_ids: list[int] = []
        self.text = ""
        self.finish_reason = "length"
        self.num_passes = 0
        self.num_prefill = 0
        self.num_cached = 0
        self.logprobs: tuple[TokenLogprob, ...] | None = None


class _Decoder:
    """One generation: prefill, then (jump-forward | masked step) until done. Holds the lock's
    worth of mutable state so the engine stays stateless between requests."""

    def __init__(self, engine: TransformersEngine, ids: list[int],
                 matcher: ConstraintMatcher | None, sampling: SamplingOptions,
                 max_tokens: int) -> None:
        self.e = engine
        self.ids = ids
        self.matcher = matcher
        self.sampling = sampling
        self.max_tokens = max_tokens
        self.out = _DecodeOut()
        torch = engine._torch
        self.generator = torch.Generator().manual_seed(sampling.seed or 0)

    def run(self) -> _DecodeOut:
        torch = self.e._torch
        out = self.out
        logits_np, kv, num_cached, passes = self.e._forward_prompt(self.ids, None)
        out.num_cached, out.num_passes = num_cached, passes
        out.num_prefill = len(self.ids) - num_cached
        logits = torch.from_numpy(logits_np[-1])
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
                            logprobs.append(TokenLogprob(self.e.renderer.decode([t]), 0.0))
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
            elif token in self.e._stop_ids:
                out.finish_reason = "stop"
                break
            generated.append(token)
            if self._hit_stop_string():
                out.finish_reason = "stop"
                break
            if len(generated) >= self.max_tokens:
                break
            logits = self._step(kv, [token])
        text = self.e.renderer.decode([t for t in generated if t not in self.e._stop_ids])
        for s in self.sampling.stop:
            cut = text.find(s)
            if cut >= 0:
                text = text[:cut]
        out.text = text
        out.logprobs = tuple(logprobs) if self.sampling.top_logprobs is not None else None
        return out

    def _step(self, kv: Any, tokens: list[int]) -> Any:
        torch = self.e._torch
        with torch.inference_mode():
            res = self.e.model(input_ids=torch.tensor([tokens]), cache=kv,
                               use_cache=True, logits_to_keep=1)
        self.out.num_passes += 1
        self.e._counters["forward_passes"] += 1
        return res.logits[0, -1].float()

    def _only_stop_allowed(self) -> bool:
        assert self.matcher is not None
        allowed = np.flatnonzero(self.matcher.allowed_mask())
        return bool(len(allowed)) and all(int(t) in self.e._stop_ids for t in allowed)

    def _pick(self, logits: Any) -> tuple[int, TokenLogprob]:
        torch = self.e._torch
        logits = logits[: self.e.loaded.vocab_size].clone()
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
            top = tuple((self.e.renderer.decode([int(i)]), float(v))
                        for v, i in zip(values, indices, strict=True) if v > -math.inf)
        return token, TokenLogprob(self.e.renderer.decode([token]), float(logp[token]), top)

    def _hit_stop_string(self) -> bool:
        if not self.sampling.stop:
            return False
        tail = self.e.renderer.decode(self.out.token_ids[-16:])
        return any(s in tail for s in self.sampling.stop)
