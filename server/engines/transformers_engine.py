"""The embedded CPU engine: a transformers causal LM, a prefix KV cache shaped like the call
stack, menu choices over a token trie in one forward pass, and xgrammar-constrained generation.

A menu decision is one forward pass: the prompt's new tokens and every non-terminal node of the
menu's token trie go in together, the trie tokens under a tree attention mask (each attends to
the prompt and to its own trie ancestors; `tree_attention.py`). The last prompt position gives
the distribution at the trie root and each trie node the distribution of its children, so the
greedy choice and every option's probability come from that one pass. The KV of the trie tokens
is then cropped off and the prompt's KV stored in the prefix cache for the next call
(`model_runner.py`). A drafted path is verified the same way, one trie per level
(`verify_path`), and the requests that unwind the stack as a prompt tree (`verify_levels`);
generation is `decoding.py`.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from stackroute.grammars.bounded import bounded_schema
from stackroute.grammars.cache import ConstraintCache, tokenizer_fingerprint
from stackroute.grammars.jump_forward import JumpForward
from stackroute.grammars.menu import CompiledMenu
from stackroute.grammars.schema import (
    CompiledGrammar,
    InvalidGrammarError,
    compile_regex,
    compile_schema,
    grammar_tokenizer_info,
)
from stackroute.grammars.string_caps import DEFAULT_MAX_STRING_CHARS, has_string_at_cap
from stackroute.runtime.tree import CapabilityTree
from stackroute.runtime.usage import Usage
from stackroute.server.engines.base import (
    EMPTY_OBJECT_SCHEMA,
    Constraint,
    ConstraintKind,
    DeltaSink,
    EngineInfo,
    Generation,
    MenuResult,
    PrepareStats,
    PromptInput,
    SamplingOptions,
)
from stackroute.server.engines.chat_template import read_chat_template
from stackroute.server.engines.common import Counters, check_context, single_option_result
from stackroute.server.engines.cpu_dtype import DEFAULT_DTYPE
from stackroute.server.engines.decoding import Decoder
from stackroute.server.engines.local_engine import LocalEngine
from stackroute.server.engines.menu_variants import leaf_schemas
from stackroute.server.engines.model_runner import ModelRunner
from stackroute.server.engines.model_store import LoadedModel, load_model, resolve_model
from stackroute.server.engines.prefix_cache import PrefixCache
from stackroute.server.engines.prompt_lookup import DEFAULT_MAX_DRAFT_TOKENS, PromptLookup
from stackroute.server.engines.rendering import ChatRenderer
from stackroute.server.engines.streaming import TextAssembler
from stackroute.server.engines.tree_attention import Branch, rows_by_branch
from stackroute.server.engines.verification import MenuLevel, PathLayoutError, PathLevel

log = logging.getLogger(__name__)

DEFAULT_CACHE_BYTES = 1 << 30  # 1 GiB of KV: about 23k tokens of SmolLM2-135M in float32
DEFAULT_PREFILL_CHUNK = 1024  # tokens per forward pass; bounds attention memory on long prompts


class TransformersEngine(LocalEngine):
    def __init__(self, *, model: str | None = None, dtype: str = DEFAULT_DTYPE,
                 cache_bytes: int = DEFAULT_CACHE_BYTES, is_cache_enabled: bool = True,
                 num_threads: int | None = None,
                 prefill_chunk_tokens: int = DEFAULT_PREFILL_CHUNK,
                 max_string_chars: int | None = DEFAULT_MAX_STRING_CHARS,
                 is_jump_forward: bool = True,
                 max_draft_tokens: int = DEFAULT_MAX_DRAFT_TOKENS,
                 chat_template: str | Path | None = None,
                 loaded: LoadedModel | None = None) -> None:
        """`max_string_chars` caps JSON strings whose schema sets no `maxLength` (None: no
        cap; `grammars/string_caps.py`); `is_jump_forward=False` samples every token, forced
        or not (for comparison only: it costs a pass per forced token); `max_draft_tokens`
        bounds the tokens a greedy generation drafts from its prompt per pass (0: none;
        `prompt_lookup.py`); `chat_template` is a template file that replaces the model's
        own (`chat_template.py`; used where it is prefix-stable)."""
        template = None if chat_template is None else read_chat_template(chat_template)
        self.loaded = loaded or load_model(resolve_model(model), dtype=dtype,
                                           num_threads=num_threads)
        self.model = self.loaded.model
        self.tokenizer = self.loaded.tokenizer
        self.renderer = ChatRenderer(self.tokenizer, chat_template=template)
        self.info = EngineInfo(engine="transformers", model=self.loaded.name,
                               max_context_tokens=self.loaded.max_context_tokens,
                               dtype=self.loaded.dtype,
                               features=(("prompt_rendering", self.renderer.rendering),))
        self.cache = PrefixCache(max_bytes=cache_bytes)
        self.is_cache_enabled = is_cache_enabled
        self.fingerprint = tokenizer_fingerprint(self.tokenizer)
        self.grammar_info = grammar_tokenizer_info(self.tokenizer, self.loaded.vocab_size)
        self.menus: ConstraintCache[CompiledMenu] = ConstraintCache()
        self.grammars: ConstraintCache[CompiledGrammar] = ConstraintCache()
        self.max_string_chars = max_string_chars
        self.jump_forward = JumpForward(self.renderer.encode, self.grammar_info.decoded_vocab) \
            if is_jump_forward else None
        if max_draft_tokens < 0:
            raise ValueError(f"max_draft_tokens must be 0 or more, got {max_draft_tokens}")
        self.max_draft_tokens = max_draft_tokens
        self._stop_ids = frozenset(self.loaded.eos_token_ids) | {self.renderer.end_of_turn_id}
        self._lock = threading.Lock()  # model steps are serialised; requests queue here
        self._counters = Counters("forward_passes", "prefill_tokens", "cached_tokens",
                                  "menu_calls", "generate_calls")
        self.runner = ModelRunner(self.model, cache=self.cache,
                                  is_cache_enabled=is_cache_enabled,
                                  prefill_chunk_tokens=prefill_chunk_tokens,
                                  counters=self._counters)

    # -- compilation -------------------------------------------------------------------------
    def compiled_grammar(self, constraint: Constraint) -> CompiledGrammar:
        if constraint.kind is ConstraintKind.JSON:
            schema = constraint.schema or EMPTY_OBJECT_SCHEMA
            cap = self.max_string_chars
            key = ("json", cap, json.dumps(schema, sort_keys=True))
            return self.grammars.get_or_compile(key, self.fingerprint, lambda: compile_schema(
                bounded_schema(schema, cap), self.grammar_info))
        if constraint.kind is ConstraintKind.REGEX:
            pattern = constraint.pattern or ""
            return self.grammars.get_or_compile(
                ("regex", pattern), self.fingerprint,
                lambda: compile_regex(pattern, self.grammar_info))
        raise ValueError(f"no grammar for constraint kind {constraint.kind}")

    def prepare(self, tree: CapabilityTree) -> PrepareStats:
        """Compile each router's menus (with DONE, and with BACK) and each leaf's schema."""
        started = time.perf_counter()
        menus = self._compile_menus(tree)
        num_menus, num_schemas = len(menus), 0
        for leaf, schema in zip(tree.leaves(), leaf_schemas(tree), strict=True):
            try:
                self.compiled_grammar(schema)
            except InvalidGrammarError as e:  # the catalog's author needs to know which leaf
                raise InvalidGrammarError(f"leaf {leaf.path_str}: its parameters: {e}") from None
            num_schemas += 1
        return PrepareStats(num_menus=num_menus, num_schemas=num_schemas,
                            compile_ms=(time.perf_counter() - started) * 1e3)

    # -- the protocol (choose, count_tokens, generate: LocalEngine) -----------------------------
    def _score_menu(self, prompt: PromptInput, menu: CompiledMenu, ids: list[int], *,
                    option_bias: Mapping[str, float] | None, started: float) -> MenuResult:
        branch = Branch(prompt_len=len(ids), menu=menu)
        with self._lock:
            done = self.runner.run_prompt(ids, [branch])
        (rows,) = rows_by_branch(done.logits, [branch])
        choice = menu.decide(lambda node: rows[node], option_bias=option_bias)
        self._counters.add(menu_calls=1)
        usage = Usage(model_calls=1, prompt_tokens=len(ids),
                      prefill_tokens=len(ids) - done.num_cached, cached_tokens=done.num_cached,
                      generated_tokens=len(menu.sequence(choice.choice)),
                      forward_passes=done.num_passes,
                      latency_ms=(time.perf_counter() - started) * 1e3)
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
        check_context(len(prompts[-1]) + max(len(s) for m in menus for s in m.sequences),
                      self.info.max_context_tokens)
        branches = [Branch(prompt_len=len(ids), menu=menu)
                    for ids, menu in zip(prompts, menus, strict=True)]
        with self._lock:
            # The cache gets the last prompt's KV: an accepted path's frames find theirs.
            done = self.runner.run_prompt(prompts[-1], branches)
        self._counters.add(menu_calls=1)
        results = []
        level_rows = rows_by_branch(done.logits, branches)
        for k, (ids, menu, rows) in enumerate(zip(prompts, menus, level_rows, strict=True)):
            choice = menu.decide(lambda node, r=rows: r[node],  # type: ignore[misc]
                                 option_bias=levels[k].option_bias)
            usage = Usage(prompt_tokens=len(ids),
                          generated_tokens=len(menu.sequence(choice.choice)))
            if k == 0:
                usage = usage + Usage(
                    model_calls=1, prefill_tokens=len(prompts[-1]) - done.num_cached,
                    cached_tokens=done.num_cached, forward_passes=done.num_passes,
                    latency_ms=(time.perf_counter() - started) * 1e3)
            results.append(MenuResult(
                choice=choice.choice,
                probabilities={o: math.exp(lp) for o, lp in choice.option_logprobs.items()},
                margin=choice.margin, usage=usage))
        return results

    def verify_levels(self, levels: Sequence[MenuLevel]) -> list[MenuResult]:
        """Each level's constrained choice under its own prompt, from one forward pass (plus
        causal prefill chunks of a long uncached head of level 0's prompt): the prompts form a
        token tree over the cached prefix of level 0's, each level's menu trie hangs off its
        prompt's last token (`tree_attention.levels_batch`), so level k sees exactly its own
        prompt. The cache keeps level 0's prompt (the others share only a prefix with it)."""
        if not levels:
            raise ValueError("verify_levels needs at least one level")
        started = time.perf_counter()
        menus = [self.compiled_menu(level.options) for level in levels]
        prompts = [self.renderer.prompt_ids(level.prompt) for level in levels]
        for ids, menu in zip(prompts, menus, strict=True):
            check_context(len(ids) + max(len(s) for s in menu.sequences),
                          self.info.max_context_tokens)
        with self._lock:
            done = self.runner.run_levels(prompts, menus)
        self._counters.add(menu_calls=1)
        results = []
        level_rows = rows_by_branch(done.logits, [Branch(prompt_len=len(ids), menu=menu)
                                                  for ids, menu in zip(prompts, menus,
                                                                       strict=True)])
        for k, (ids, menu, rows) in enumerate(zip(prompts, menus, level_rows, strict=True)):
            if not menu.branch_points:  # one option: what `choose` answers without the model
                single = single_option_result(menu.options[0])
                choice_name, probabilities, margin = single.choice, single.probabilities, \
                    single.margin
            else:
                choice = menu.decide(lambda node, r=rows: r[node],  # type: ignore[misc]
                                     option_bias=levels[k].option_bias)
                choice_name, margin = choice.choice, choice.margin
                probabilities = {o: math.exp(lp) for o, lp in choice.option_logprobs.items()}
            usage = Usage(prompt_tokens=len(ids),
                          generated_tokens=len(menu.sequence(choice_name)))
            if k == 0:
                usage = usage + Usage(
                    model_calls=1, prefill_tokens=done.num_prefilled,
                    cached_tokens=done.num_cached, forward_passes=done.num_passes,
                    latency_ms=(time.perf_counter() - started) * 1e3)
            results.append(MenuResult(choice=choice_name, probabilities=probabilities,
                                      margin=margin, usage=usage))
        return results

    def generate_stream(self, prompt: PromptInput, *, on_delta: DeltaSink | None,
                        constraint: Constraint | None = None,
                        sampling: SamplingOptions | None = None) -> Generation:
        """The answer's text goes to `on_delta` after every decoder pass (sampled, drafted
        and jump-forward tokens alike); a choice is decided in one pass and sent whole."""
        sampling = sampling or SamplingOptions()
        stream = None if on_delta is None else TextAssembler(on_delta, stop=sampling.stop)
        if constraint is not None and constraint.kind is ConstraintKind.CHOICE:
            return self._scored_choice(prompt, constraint.choices, stream)
        started = time.perf_counter()
        matcher = None if constraint is None else self.compiled_grammar(constraint).matcher()
        ids = self._generation_prompt(prompt)
        max_tokens = min(sampling.max_tokens, self.info.max_context_tokens - len(ids))
        decoder = Decoder(self.runner, decode=self.renderer.decode, stop_ids=self._stop_ids,
                          vocab_size=self.loaded.vocab_size, prompt_ids=ids, matcher=matcher,
                          sampling=sampling, max_tokens=max_tokens,
                          jump_forward=self.jump_forward, lookup=self._lookup(ids, sampling),
                          on_tokens=None if stream is None else lambda tokens: stream.push(
                              self.renderer.decode([t for t in tokens
                                                    if t not in self._stop_ids])))
        with self._lock:
            out = decoder.run()
        if stream is not None:
            stream.finish(out.text)
        self._counters.add(generate_calls=1)
        usage = Usage(model_calls=1, prompt_tokens=len(ids), prefill_tokens=out.num_prefill,
                      cached_tokens=out.num_cached, generated_tokens=len(out.token_ids),
                      forward_passes=out.num_passes,
                      latency_ms=(time.perf_counter() - started) * 1e3)
        return Generation(text=out.text, finish_reason=out.finish_reason, usage=usage,
                          logprobs=out.logprobs,
                          is_string_capped=self._is_string_capped(constraint, out.text))

    def _lookup(self, ids: Sequence[int], sampling: SamplingOptions) -> PromptLookup | None:
        if not self.max_draft_tokens or sampling.temperature > 0:
            return None
        return PromptLookup(self.renderer.decode(ids), self.renderer.encode,
                            max_draft_tokens=self.max_draft_tokens)

    def _is_string_capped(self, constraint: Constraint | None, text: str) -> bool:
        if self.max_string_chars is None or constraint is None \
                or constraint.kind is not ConstraintKind.JSON:
            return False
        try:
            value = json.loads(text)
        except ValueError:  # cut off at max_tokens: finish_reason says so
            return False
        return has_string_at_cap(value, self.max_string_chars)

    def metrics(self) -> dict[str, float]:
        stats = self.cache.stats()
        return {**self._counters.snapshot(), "cache_hit_rate": stats.hit_rate,
                "cache_bytes": float(stats.bytes_held),
                "cache_evictions": float(stats.num_evictions),
                "menu_compile_ms": self.menus.compile_ms_total,
                "grammar_compile_ms": self.grammars.compile_ms_total}
