"""The vLLM engine: in-process `AsyncLLM` (vLLM's V1 engine) with automatic prefix caching and
structured outputs. The production engine on GPUs; optional (`pip install stackroute[gpu]`),
imported only when `--engine vllm` asks for it.

Why `AsyncLLM` and not `LLM`: the engine protocol is synchronous, but the server calls it from
many threads at once. `LLM.generate` is neither thread-safe nor able to take requests while it
runs, so concurrent callers would serialise. `AsyncLLM` runs the engine core in its own process
with continuous batching; this class keeps one event loop in a background thread, and each
protocol call submits its requests to that loop and waits. Callers in different threads land
in the same batches.

Prompts are rendered by our `ChatRenderer` (message by message) and sent as token ids, so the
append-only layout is append-only at the token level, exactly as the transformers engine sees
it, and vLLM's prefix cache (on by default; `is_cache_enabled=False` turns it off) serves the
shared part of consecutive routing calls. `Usage.cached_tokens` is vLLM's own
`num_cached_tokens` (whole KV blocks only: 16 tokens on GPU, 128 on CPU).

A menu (`choose`) is decided by **scoring, not by constrained decoding** (`MenuMode.SCORE`):
the menu's canonical token trie (as the transformers engine builds it) is walked with
unconstrained `max_tokens=1` requests whose `logprob_token_ids` are the children of each branch
point. Options with distinct first tokens need one request (it reads the prefix cache);
options that share prefixes need one more, for all deeper branch points at once, after the
first has cached the prompt. The answer is the constrained greedy walk over those
log-probabilities, bias included, by the same code as the transformers engine
(`CompiledMenu.decide`), so both engines make the same decision from the same numbers and
the probabilities are the model's own over canonical spellings, exact. Constrained decoding
would be slower (a decode step per token) and its post-mask logprobs describe a different
distribution, where non-canonical spellings (`s|ear|ch`) compete. Prompt logprobs are never
used: they skip the prefix cache (and forcing it crashed vLLM).

`MenuMode.CONSTRAINED` is the fallback and the cross-check: `StructuredOutputsParams(choice=…)`
with top-k logprobs, the answer required to be an option with `finish_reason == "stop"`, and
the probabilities estimated from the post-mask logprobs (`option_scoring.py`). JSON and regex
constraints always use structured outputs (xgrammar, engine-level `disable_any_whitespace`,
since xgrammar ignores the per-request flag). `prepare()` sends every leaf schema (and, in
constrained mode, every menu) once, so grammars compile before the first user request.

Near-ties: a decision whose margin is under `NEAR_TIE_MARGIN` is counted in `metrics()`
(`near_tie_menus`); such decisions can flip between a cold and a warm cache or between batch
shapes, because kernels differ. `VllmOptions.is_batch_invariant` sets vLLM's
`VLLM_BATCH_INVARIANT=1` (process-wide, read when vLLM is imported; GPU kernels), which makes
results independent of batch shape at some speed cost.
"""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import json
import logging
import math
import os
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np
from stackroute.grammars.cache import ConstraintCache, tokenizer_fingerprint
from stackroute.grammars.menu import CompiledMenu, compile_menu
from stackroute.grammars.schema import grammar_tokenizer_info
from stackroute.grammars.trie import ROOT
from stackroute.runtime.errors import InputError
from stackroute.runtime.messages import Message
from stackroute.runtime.prompt import Prompt
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
from stackroute.server.engines.option_scoring import (
    NEAR_TIE_MARGIN,
    TokenStep,
    check_menu,
    decide_from_answer,
    max_answer_tokens,
)
from stackroute.server.engines.rendering import ChatRenderer

log = logging.getLogger(__name__)

MAX_LOGPROB_TOKEN_IDS = 128  # vLLM's cap per request; wider branch points are split
GPU_MEMORY_ENV = "STACKROUTE_VLLM_GPU_MEMORY_UTILIZATION"
_WARM_UP_PROMPT = Prompt((Message("user", "Warm-up."),))


class MenuMode(StrEnum):
    SCORE = "score"  # logprob_token_ids over the canonical trie: exact, one or two requests
    CONSTRAINED = "constrained"  # structured_outputs choice + post-mask logprobs: estimated


class VllmNotInstalledError(InputError):
    code = "engine_unavailable"


class VllmRequestError(InputError):
    """vLLM refused a request for its content (an invalid schema or regex, say)."""

    code = "invalid_constraint"


@dataclass(frozen=True, kw_only=True)
class VllmOptions:
    dtype: str = "auto"  # the checkpoint's dtype (bf16 for most); CPU needs "bfloat16"
    max_model_len: int | None = None  # None: the model's own
    max_num_seqs: int = 64  # sequences per batch
    # None: $STACKROUTE_VLLM_GPU_MEMORY_UTILIZATION, else 0.85 (two engines on one GPU: 0.4)
    gpu_memory_utilization: float | None = None
    enforce_eager: bool = False  # skip CUDA graphs / torch.compile: faster start, slower calls
    is_batch_invariant: bool = False
    seed: int = 0
    menu_mode: MenuMode = MenuMode.SCORE
    top_logprobs: int = 20  # constrained mode's top-k (vLLM's max_logprobs default)
    request_timeout_s: float = 600.0


class VllmEngine:
    """An `Engine` over an in-process vLLM `AsyncLLM`; thread-safe. Call `close()` to stop
    its engine process."""

    def __init__(self, *, model: str | None = None, is_cache_enabled: bool = True,
                 options: VllmOptions | None = None, base_url: str | None = None) -> None:
        if base_url is not None:
            raise InputError("engine 'vllm' runs the model in this process; for a server at "
                             f"{base_url} use --engine remote")
        spec = importlib.util.find_spec("vllm")
        if spec is None or spec.origin is None:
            raise VllmNotInstalledError("engine 'vllm' needs vLLM in this environment: pip install "
                                        "vllm (docs/gpu.md says how, beside stackroute's pins)")
        self.options = o = options or VllmOptions()
        self.is_cache_enabled = is_cache_enabled
        started = time.perf_counter()
        _set_batch_invariance(o.is_batch_invariant)
        from stackroute.server.engines.model_store import _model_name, resolve_model
        from transformers import AutoTokenizer

        model_dir = resolve_model(model)  # a GGUF becomes a folder once (vLLM on CPU needs it)
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
        self.renderer = ChatRenderer(self.tokenizer)
        self.fingerprint = tokenizer_fingerprint(self.tokenizer)
        self.menus: ConstraintCache[CompiledMenu] = ConstraintCache()
        self._counters = dict.fromkeys(
            ("menu_calls", "generate_calls", "requests", "prompt_tokens", "prefill_tokens",
             "cached_tokens", "generated_tokens", "near_tie_menus", "inexact_menus",
             "warm_up_ms"), 0.0)
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="vllm-engine-loop")
        self._thread.start()
        try:
            self._llm: Any = self._call(self._start(str(model_dir)), timeout_s=None)
        except BaseException:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=30)
            self._loop.close()
            raise
        config = self._llm.model_config
        self._vocab_size = int(config.get_vocab_size())
        self.info = EngineInfo(engine="vllm", model=_model_name(model_dir),
                               max_context_tokens=int(config.max_model_len),
                               dtype=str(config.dtype).removeprefix("torch."))
        self._token_bytes: tuple[bytes, ...] | None = None
        self._warm_up()
        self.start_s = time.perf_counter() - started
        log.info("vLLM engine up in %.1f s (prefix cache %s)", self.start_s,
                 "on" if is_cache_enabled else "off")

    async def _start(self, model_dir: str) -> Any:
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        o = self.options
        memory = o.gpu_memory_utilization or float(os.environ.get(GPU_MEMORY_ENV, "0.85"))
        args = AsyncEngineArgs(
            model=model_dir, dtype=o.dtype, max_model_len=o.max_model_len, seed=o.seed,
            max_num_seqs=o.max_num_seqs, enable_prefix_caching=self.is_cache_enabled,
            gpu_memory_utilization=memory, enforce_eager=o.enforce_eager,
            max_logprobs=max(o.top_logprobs, 20),
            structured_outputs_config={"backend": "xgrammar", "disable_any_whitespace": True},
            disable_log_stats=True)
        return AsyncLLM.from_engine_args(args)

    def close(self) -> None:
        """Stop the engine process and the loop thread (idempotent)."""
        if self._loop.is_closed():
            return
        llm, self._llm = self._llm, None
        # Stop our loop first, so vLLM's output handler (a task on it) does not wake to a
        # dead engine core and log an error; then cancel what is left on it, here.
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        try:
            llm.shutdown()
        finally:
            pending = asyncio.all_tasks(self._loop)
            for task in pending:
                task.cancel()
            self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self._loop.close()
            del llm  # now, while the interpreter is whole: its __del__ shuts down again

    def reset_prefix_cache(self) -> None:
        """Drop every cached KV block (benchmarks start each route cold)."""
        self._call(self._llm.reset_prefix_cache())

    def _warm_up(self) -> None:
        """One scored menu and one short generation, so the first user call does not pay for
        first-request setup (it took a minute on a busy 2-core CPU)."""
        prompt = self.renderer.prompt_ids(_WARM_UP_PROMPT)
        self._call(self._gather([(prompt, self._score_params([0, 1])),
                                 (prompt, self._params(None, SamplingOptions(max_tokens=2)))]))

    # -- compilation ------------------------------------------------------------------------------
    def compiled_menu(self, options: Sequence[str]) -> CompiledMenu:
        menu = check_menu(options)
        return self.menus.get_or_compile(("menu", menu), self.fingerprint, lambda: compile_menu(
            menu, self.tokenizer, end_token_id=self.renderer.end_of_turn_id))

    def prepare(self, tree: CapabilityTree) -> PrepareStats:
        """Compile every router's menus (their token tries) and warm every constraint vLLM
        compiles: each leaf's schema, and in constrained mode each menu's choice grammar."""
        started = time.perf_counter()
        menus = menu_variants(tree)
        for menu in menus:
            self.compiled_menu(menu)
        schemas = [Constraint.json(leaf.parameters or {"type": "object", "properties": {}})
                   for leaf in tree.leaves()]
        warm = list(schemas)
        if self.options.menu_mode is MenuMode.CONSTRAINED:
            warm += [Constraint.choice(m) for m in menus if len(m) > 1]
        ids = self.renderer.prompt_ids(_WARM_UP_PROMPT)
        self._call(self._gather([(ids, self._params(c, SamplingOptions(max_tokens=1)))
                                 for c in warm]))
        elapsed_ms = (time.perf_counter() - started) * 1e3
        self._count(warm_up_ms=elapsed_ms)
        return PrepareStats(num_menus=len(menus), num_schemas=len(schemas),
                            compile_ms=elapsed_ms)

    # -- the protocol -----------------------------------------------------------------------------
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
                              usage=Usage(prompt_tokens=len(ids)))
        if self.options.menu_mode is MenuMode.CONSTRAINED:
            return self.choose_constrained(prompt, menu.options, option_bias=option_bias)
        rows, usage = self._score_branch_points(ids, menu)
        decided = menu.decide(lambda node: rows[node], option_bias=option_bias)
        self._count(menu_calls=1, near_tie_menus=float(decided.margin < NEAR_TIE_MARGIN))
        usage = Usage(model_calls=1, prompt_tokens=len(ids),
                      prefill_tokens=usage.prefill_tokens, cached_tokens=usage.cached_tokens,
                      generated_tokens=len(menu.sequence(decided.choice)),
                      forward_passes=usage.forward_passes,
                      latency_ms=(time.perf_counter() - started) * 1e3)
        return MenuResult(choice=decided.choice, margin=decided.margin, usage=usage,
                          probabilities={o: math.exp(lp)
                                         for o, lp in decided.option_logprobs.items()})

    def generate(self, prompt: PromptInput, *, constraint: Constraint | None = None,
                 sampling: SamplingOptions | None = None) -> Generation:
        sampling = sampling or SamplingOptions()
        if constraint is not None and constraint.kind is ConstraintKind.CHOICE \
                and self.options.menu_mode is MenuMode.SCORE:
            return self._generate_choice(prompt, constraint.choices)
        started = time.perf_counter()
        ids = self.renderer.prompt_ids(prompt)
        self._check_context(len(ids) + 1)
        sampling = SamplingOptions(
            max_tokens=min(sampling.max_tokens, self.info.max_context_tokens - len(ids)),
            temperature=sampling.temperature, stop=sampling.stop,
            top_logprobs=sampling.top_logprobs, seed=sampling.seed)
        (out,) = self._call(self._gather([(ids, self._params(constraint, sampling))]))
        gen = self._generation(ids, out, sampling.top_logprobs, started)
        if constraint is not None and gen.finish_reason == "stop":
            _check_finished(gen.text, constraint)
        self._count(generate_calls=1)
        return gen

    def metrics(self) -> dict[str, float]:
        with self._lock:
            counters = dict(self._counters)
        return {**counters, "menu_compile_ms": self.menus.compile_ms_total,
                "start_s": self.start_s}

    # -- menus ------------------------------------------------------------------------------------
    def _score_branch_points(self, ids: list[int], menu: CompiledMenu,
                             ) -> tuple[dict[int, np.ndarray[Any, Any]], Usage]:
        """Log-probabilities of each branch point's children, as sparse rows (-inf elsewhere)
        for `CompiledMenu.decide`. The root first, alone, so its prompt is in the prefix cache
        before the deeper branch points (the prompt plus a few trie tokens) are scored."""
        trie = menu.trie
        points = list(menu.branch_points)
        width = 1 + max(e.token_id for n in points for e in trie.edges(n))
        rows = {n: np.full(width, -np.inf) for n in points}
        usage = Usage()
        for phase in ([ROOT], [n for n in points if n != ROOT]):
            requests, owners = [], []
            for node in phase:
                children = [e.token_id for e in trie.edges(node)]
                for at in range(0, len(children), MAX_LOGPROB_TOKEN_IDS):
                    chunk = children[at:at + MAX_LOGPROB_TOKEN_IDS]
                    requests.append((ids + _trie_path(trie, node), self._score_params(chunk)))
                    owners.append((node, chunk))
            if not requests:
                continue
            outs = self._call(self._gather(requests))
            for (node, chunk), (prompt_ids, _), out in zip(owners, requests, outs, strict=True):
                scored = out.outputs[0].logprobs[0]
                rows[node][chunk] = [scored[t].logprob for t in chunk]
                cached = int(out.num_cached_tokens or 0)
                usage += Usage(prefill_tokens=len(prompt_ids) - cached,
                               cached_tokens=cached if node == ROOT else 0)
            usage += Usage(forward_passes=1)
        return rows, usage

    def _score_params(self, token_ids: list[int]) -> Any:
        from vllm import SamplingParams

        return SamplingParams(max_tokens=1, temperature=0.0, logprob_token_ids=token_ids,
                              detokenize=False)

    def choose_constrained(self, prompt: PromptInput, options: Sequence[str], *,
                           option_bias: Mapping[str, float] | None = None) -> MenuResult:
        """A menu by vLLM's structured outputs (`MenuMode.CONSTRAINED`): the greedy
        constrained answer, required to be an option with `finish_reason == "stop"`, with
        probabilities estimated from its post-mask top-k logprobs (see `option_scoring`)."""
        started = time.perf_counter()
        options = check_menu(options)
        ids = self.renderer.prompt_ids(prompt)
        self._check_context(len(ids) + max_answer_tokens(options))
        sampling = SamplingOptions(max_tokens=max_answer_tokens(options),
                                   top_logprobs=self.options.top_logprobs)
        params = self._params(Constraint.choice(options), sampling)
        (out,) = self._call(self._gather([(ids, params)]))
        gen = self._generation(ids, out, sampling.top_logprobs, started)
        if gen.finish_reason != "stop" or gen.text not in options:
            raise RuntimeError(f"vLLM's choice constraint produced {gen.text!r} with "
                               f"finish_reason {gen.finish_reason!r}")  # vLLM's bug or ours
        steps = self._steps(out)
        decision = decide_from_answer(options, gen.text, steps, option_bias=option_bias)
        self._count(menu_calls=1, inexact_menus=float(not decision.is_exact),
                    near_tie_menus=float(decision.margin < NEAR_TIE_MARGIN))
        return MenuResult(choice=decision.choice, probabilities=decision.probabilities,
                          margin=decision.margin, usage=gen.usage)

    def _generate_choice(self, prompt: PromptInput, choices: Sequence[str]) -> Generation:
        result = self.choose(prompt, choices)
        ranked = sorted(result.probabilities.items(), key=lambda kv: -kv[1])
        top = tuple((o, math.log(max(p, 1e-300))) for o, p in ranked)
        entry = TokenLogprob(token=result.choice, top=top, logprob=math.log(
            max(result.probabilities[result.choice], 1e-300)))
        return Generation(text=result.choice, finish_reason="stop", usage=result.usage,
                          logprobs=(entry,))

    # -- requests ---------------------------------------------------------------------------------
    def _params(self, constraint: Constraint | None, sampling: SamplingOptions) -> Any:
        from vllm import SamplingParams
        from vllm.sampling_params import StructuredOutputsParams

        structured = None  # a new one each time: vLLM rewrites a choice into a grammar in place
        if constraint is not None:
            if constraint.kind is ConstraintKind.CHOICE:
                structured = StructuredOutputsParams(choice=list(check_menu(constraint.choices)))
            elif constraint.kind is ConstraintKind.REGEX:
                structured = StructuredOutputsParams(regex=constraint.pattern or "")
            else:
                structured = StructuredOutputsParams(
                    json=dict(constraint.schema or {"type": "object"}))
        return SamplingParams(
            max_tokens=sampling.max_tokens, temperature=sampling.temperature,
            stop=list(sampling.stop) or None, seed=sampling.seed,
            logprobs=sampling.top_logprobs, structured_outputs=structured,
            stop_token_ids=[self.renderer.end_of_turn_id])

    def _call(self, coroutine: Any, *, timeout_s: float | None = -1.0) -> Any:
        """Run a coroutine on the engine's loop from any thread; its result."""
        wait = self.options.request_timeout_s if timeout_s == -1.0 else timeout_s
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        return future.result(timeout=wait)

    async def _gather(self, requests: Sequence[tuple[list[int], Any]]) -> list[Any]:
        return list(await asyncio.gather(*(self._one(ids, p) for ids, p in requests)))

    async def _one(self, ids: list[int], params: Any) -> Any:
        from vllm.exceptions import VLLMValidationError
        from vllm.inputs import TokensPrompt

        final = None
        try:
            async for out in self._llm.generate(TokensPrompt(prompt_token_ids=ids), params,
                                                request_id=f"stackroute-{next(self._ids)}"):
                final = out
        except VLLMValidationError as error:
            raise VllmRequestError(f"vLLM refused the request: {error}") from error
        if final is None:
            raise RuntimeError("vLLM finished a request without output")
        self._count(requests=1)
        return final

    def _generation(self, ids: list[int], out: Any, top_logprobs: int | None,
                    started: float) -> Generation:
        completion = out.outputs[0]
        token_ids = list(completion.token_ids)
        cached = int(out.num_cached_tokens or 0)
        usage = Usage(model_calls=1, prompt_tokens=len(ids), prefill_tokens=len(ids) - cached,
                      cached_tokens=cached, generated_tokens=len(token_ids),
                      forward_passes=max(1, len(token_ids)),
                      latency_ms=(time.perf_counter() - started) * 1e3)
        self._count(prompt_tokens=usage.prompt_tokens, prefill_tokens=usage.prefill_tokens,
                    cached_tokens=usage.cached_tokens, generated_tokens=usage.generated_tokens)
        finish = completion.finish_reason
        if finish not in ("stop", "length"):
            raise RuntimeError(f"vLLM ended a request with finish_reason {finish!r}")
        logprobs = None
        if top_logprobs is not None and completion.logprobs is not None:
            logprobs = tuple(_token_logprob(self.renderer, t, entry, top_logprobs)
                             for t, entry in zip(token_ids, completion.logprobs, strict=True))
        return Generation(text=completion.text, finish_reason=finish, usage=usage,
                          logprobs=logprobs)

    def _steps(self, out: Any) -> list[TokenStep]:
        """Token steps with exact bytes (a byte-level token may be half a character)."""
        if self._token_bytes is None:
            info = grammar_tokenizer_info(self.tokenizer, self._vocab_size)
            self._token_bytes = info.decoded_vocab
        vocab = self._token_bytes
        completion = out.outputs[0]
        steps = []
        for token, entry in zip(completion.token_ids, completion.logprobs or (), strict=False):
            alternatives = tuple((vocab[t] if t < len(vocab) else b"", lp.logprob)
                                 for t, lp in sorted(entry.items(), key=lambda kv: kv[1].rank))
            steps.append(TokenStep(vocab[token] if token < len(vocab) else b"",
                                   entry[token].logprob, alternatives))
        return steps

    def _check_context(self, num_tokens: int) -> None:
        if num_tokens > self.info.max_context_tokens:
            raise ContextOverflowError(
                f"prompt needs {num_tokens} tokens; the model's context holds "
                f"{self.info.max_context_tokens}")

    def _count(self, **amounts: float) -> None:
        with self._lock:
            for name, amount in amounts.items():
                self._counters[name] += amount


def _trie_path(trie: Any, node: int) -> list[int]:
    """The trie tokens from the root down to `node` (its own token last)."""
    tokens: list[int] = []
    while node != ROOT:
        tokens.append(trie.token_ids[node])
        node = trie.parent[node]
    return tokens[::-1]


def _token_logprob(renderer: ChatRenderer, token: int, entry: Mapping[int, Any],
                   k: int) -> TokenLogprob:
    ranked = sorted(entry.items(), key=lambda kv: -kv[1].logprob)[:k]
    top = tuple((lp.decoded_token or renderer.decode([t]), float(lp.logprob)) for t, lp in ranked)
    chosen = entry[token]
    return TokenLogprob(token=chosen.decoded_token or renderer.decode([token]),
                        logprob=float(chosen.logprob), top=top)


def _check_finished(text: str, constraint: Constraint) -> None:
    """A finished answer must satisfy its constraint; anything else is vLLM's bug or ours."""
    if constraint.kind is ConstraintKind.CHOICE and text not in constraint.choices:
        raise RuntimeError(f"vLLM's choice constraint produced {text!r}")
    if constraint.kind is ConstraintKind.JSON:
        try:
            json.loads(text)
        except ValueError as error:
            raise RuntimeError(f"vLLM's JSON constraint produced {text[:200]!r}") from error


def _set_batch_invariance(is_enabled: bool) -> None:
    """vLLM reads VLLM_BATCH_INVARIANT when it is imported, process-wide."""
    current = os.environ.get("VLLM_BATCH_INVARIANT", "0") not in ("", "0")
    if is_enabled == current:
        return
    if "vllm" in sys.modules:
        raise InputError("batch invariance must be chosen before vLLM is imported: set "
                         f"VLLM_BATCH_INVARIANT={int(is_enabled)} at process start")
    os.environ["VLLM_BATCH_INVARIANT"] = "1" if is_enabled else "0"
