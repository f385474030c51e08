"""The remote engine: any OpenAI-compatible server, over pooled HTTP. What the upstream offers
for constraining a menu (vLLM's `structured_outputs`, `response_format` json_schema with an
enum, llama.cpp's GBNF `grammar`; logprobs or not) is probed at start and the best used
(`remote_features.py`; `constraints="auto"`, what the CLI and the service ask for); built
directly without `constraints`, it assumes `structured_outputs` with logprobs, as before.

This is the scale-out path: many stackroute runtimes, one GPU deployment. Prompts go as chat
messages, so the server renders the same append-only layout and its own prefix cache serves
the shared part of consecutive routing calls (`usage.cached_tokens` is read from
`usage.prompt_tokens_details.cached_tokens`; vLLM reports it with
`--enable-prompt-tokens-details`, else 0).

A menu is one choice-constrained chat completion with `logprobs`/`top_logprobs`. The answer
must be one of the options with `finish_reason == "stop"`; anything else means the server
ignored the constraint (vLLM silently ignores the removed `guided_*` fields, for instance) or
cut the answer off, and raises a typed error instead of being accepted. Option probabilities
come from the answer's post-mask logprobs (`option_scoring.py` says exactly what they mean and
when they are exact: always against `stackroute serve` with up to 20 options, an estimate
against vLLM when options share prefixes or the top-k misses allowed tokens).

`option_bias` is applied to those probabilities on this side (`p(o) * exp(bias(o))`,
renormalised, and the choice is its argmax), which is what the transformers engine computes
when options have distinct first tokens. It needs the exact distribution: with an estimate it
raises `OptionBiasError` rather than tilt numbers it cannot vouch for. (`logit_bias` is no
substitute: it acts on single token ids, which this side does not know, and a constrained
decoder spells options in non-canonical tokens the bias would miss.)

Retries and errors: `remote_http.py` and `remote_errors.py`; bodies and response shapes:
`remote_shapes.py`.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
from stackroute.runtime.errors import InputError
from stackroute.runtime.messages import Message
from stackroute.runtime.prompt import Prompt
from stackroute.runtime.tree import CapabilityTree
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
    TextDelta,
)
from stackroute.server.engines.common import Counters, single_option_result
from stackroute.server.engines.menu_variants import leaf_schemas, menu_variants
from stackroute.server.engines.option_scoring import (
    NEAR_TIE_MARGIN,
    OptionBiasError,
    TokenStep,
    check_menu,
    decide_from_answer,
    max_answer_tokens,
)
from stackroute.server.engines.remote_errors import (
    OVERLOADED_STATUS,
    RemoteEngineError,
    RemoteFeatureError,
    RemoteRejectedError,
    RemoteTimeoutError,
    RemoteUnavailableError,
)
from stackroute.server.engines.remote_features import (
    LADDER,
    ConstraintApi,
    UpstreamFeatures,
    menu_answer,
    menu_body,
    probe,
    unquoted_steps,
)
from stackroute.server.engines.remote_http import RETRYABLE_STATUS, RemoteClient, RemoteOptions
from stackroute.server.engines.remote_shapes import (
    StreamedCompletion,
    check_answer,
    constraint_body,
    parse_completion,
    prompt_body,
)

__all__ = [  # the errors and options live beside the client; importable from here as before
    "OVERLOADED_STATUS", "RETRYABLE_STATUS", "RemoteEngine", "RemoteEngineError",
    "RemoteFeatureError", "RemoteOptions", "RemoteRejectedError", "RemoteTimeoutError",
    "RemoteUnavailableError"]

log = logging.getLogger(__name__)

API_KEY_ENV = "STACKROUTE_REMOTE_API_KEY"
_WARM_UP_PROMPT = Prompt((Message("user", "Warm-up: answer with one option."),))


class RemoteEngine:
    """An `Engine` over HTTP; thread-safe (one pooled `httpx.Client` shared by all calls)."""

    def __init__(self, *, base_url: str, model: str | None = None, api_key: str | None = None,
                 is_cache_enabled: bool = True, options: RemoteOptions | None = None,
                 transport: httpx.BaseTransport | None = None,
                 constraints: ConstraintApi | str | None = None) -> None:
        """`constraints`: "auto" probes the upstream now (`remote_features.probe`); a rung's
        name uses that rung unprobed; None assumes `structured_outputs` with logprobs."""
        if not is_cache_enabled:
            raise InputError("a remote server's prefix cache is the server's own setting "
                             "(vLLM: --no-enable-prefix-caching); it cannot be turned off "
                             "per client")
        try:
            fixed = None if constraints in (None, "auto") else ConstraintApi(constraints)
        except ValueError:
            raise InputError(f"constraints must be auto or one of "
                             f"{', '.join(a.value for a in ConstraintApi)}; got "
                             f"{constraints!r}") from None
        self.options = options or RemoteOptions()
        self._counters = Counters(
            "requests", "retries", "menu_calls", "generate_calls", "inexact_menus",
            "near_tie_menus", "prompt_tokens", "cached_tokens", "generated_tokens",
            "latency_ms_total", "warm_up_ms")
        key = api_key if api_key is not None else os.environ.get(API_KEY_ENV)
        self._http = RemoteClient(base_url, api_key=key, options=self.options,
                                  counters=self._counters, transport=transport)
        self._has_tokenize: bool | None = None
        self.info = self._served_model(model)
        self.features = UpstreamFeatures()
        if constraints == "auto":
            self.detect_features()
        elif fixed is not None:
            self._use(UpstreamFeatures(constraints=fixed))
        else:
            self._use(self.features)

    def detect_features(self, ladder: Sequence[ConstraintApi] = LADDER) -> UpstreamFeatures:
        """Probe what the upstream offers (a few tiny requests) and use the best rung of
        `ladder` it honours."""
        self._use(probe(lambda body: self._http.request(
            "POST", "/v1/chat/completions", {"model": self.info.model, **body}), ladder,
            assumed=self.features))
        return self.features

    def _use(self, features: UpstreamFeatures) -> None:
        self.features = features
        self.info = dataclasses.replace(self.info, features=features.as_pairs())

    def close(self) -> None:
        """Close the connection pool (idempotent)."""
        self._http.close()

    @property
    def is_closed(self) -> bool:
        return self._http.is_closed

    def __enter__(self) -> RemoteEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the protocol ----------------------------------------------------------------------------
    def count_tokens(self, prompt: PromptInput) -> int:
        """The server's count: its `/tokenize` (vLLM, SGLang) when it has one, else the
        `prompt_tokens` of a one-token completion (a prefill the server's prefix cache then
        reuses for the real call)."""
        if self._has_tokenize is not False:
            body: dict[str, Any] = {"model": self.info.model, **prompt_body(prompt)}
            if isinstance(prompt, Prompt):
                body["add_generation_prompt"] = True
            try:
                data = self._http.request("POST", "/tokenize", body)
            except (RemoteRejectedError, RemoteFeatureError):
                if self._has_tokenize:
                    raise
                self._has_tokenize = False  # not this server's API (stackroute serve)
            else:
                self._has_tokenize = True
                return int(data["count"])
        return self._complete(prompt, {"max_tokens": 1})[0].usage.prompt_tokens

    def prepare(self, tree: CapabilityTree) -> PrepareStats:
        """Send each router's menus and each leaf's schema once with `max_tokens=1`, so the
        server compiles (and caches) every constraint now, not on a user's first request."""
        menus = [Constraint.choice(menu) for menu in menu_variants(tree)]
        if self.features.constraints is ConstraintApi.NONE:
            log.warning("the upstream honours no menu constraint: %d menus not warmed (menus "
                        "will fail)", len(menus))
            menus = []
        schemas = leaf_schemas(tree)
        started = time.perf_counter()
        if self.options.is_warm_up_enabled:
            with ThreadPoolExecutor(self.options.num_warm_up_threads) as pool:
                list(pool.map(self._warm_up, menus + schemas))  # raises the first failure
        elapsed_ms = (time.perf_counter() - started) * 1e3
        self._counters.add(warm_up_ms=elapsed_ms)
        return PrepareStats(num_menus=len(menus), num_schemas=len(schemas),
                            compile_ms=elapsed_ms)

    def choose(self, prompt: Prompt, options: Sequence[str], *,
               option_bias: Mapping[str, float] | None = None) -> MenuResult:
        options = check_menu(options)
        if len(options) == 1:  # nothing to decide: no request
            return single_option_result(options[0])
        has_logprobs = self.features.has_logprobs
        gen, steps = self._constrained(prompt, Constraint.choice(options), SamplingOptions(
            max_tokens=self._menu_tokens(options),
            top_logprobs=self.options.top_logprobs if has_logprobs else None))
        if not has_logprobs:
            return self._answer_only(options, gen, option_bias)
        decision = decide_from_answer(options, gen.text, steps, option_bias=option_bias)
        self._counters.add(menu_calls=1, inexact_menus=float(not decision.is_exact),
                           near_tie_menus=float(decision.margin < NEAR_TIE_MARGIN))
        return MenuResult(choice=decision.choice, probabilities=decision.probabilities,
                          margin=decision.margin, usage=gen.usage)

    def generate(self, prompt: PromptInput, *, constraint: Constraint | None = None,
                 sampling: SamplingOptions | None = None) -> Generation:
        sampling = sampling or SamplingOptions()
        if constraint is not None and constraint.kind is ConstraintKind.CHOICE:
            check_menu(constraint.choices)
        gen, _ = self._constrained(prompt, constraint, sampling)
        self._counters.add(generate_calls=1)
        return gen

    def generate_stream(self, prompt: PromptInput, *, on_delta: DeltaSink,
                        constraint: Constraint | None = None,
                        sampling: SamplingOptions | None = None) -> Generation:
        """The upstream's own stream (`stream: true`), passed on chunk by chunk as it arrives;
        the whole answer is then checked against the constraint as `generate` checks it."""
        sampling = sampling or SamplingOptions()
        if constraint is not None and constraint.kind is ConstraintKind.CHOICE:
            check_menu(constraint.choices)
            if self.features.constraints is ConstraintApi.JSON_SCHEMA:  # quoted: sent whole
                gen = self.generate(prompt, constraint=constraint, sampling=sampling)
                on_delta(TextDelta(gen.text))
                return gen
        is_chat = isinstance(prompt, Prompt)
        body = {"model": self.info.model, **prompt_body(prompt),
                **self._body(prompt, constraint, sampling), "stream": True,
                "stream_options": {"include_usage": True}}
        started = time.perf_counter()
        gathered = StreamedCompletion(is_chat=is_chat)
        for event in self._http.stream("/v1/chat/completions" if is_chat
                                       else "/v1/completions", body):
            piece = gathered.add(event)
            if piece:
                on_delta(TextDelta(piece))
        gen, _ = self._completion(gathered.as_completion(), is_chat=is_chat,
                                  latency_ms=(time.perf_counter() - started) * 1e3)
        self._check(gen, constraint, sampling)
        self._counters.add(generate_calls=1)
        return gen

    def metrics(self) -> dict[str, float]:
        return self._counters.snapshot()

    # -- requests ----------------------------------------------------------------------------------
    def _constrained(self, prompt: PromptInput, constraint: Constraint | None,
                     sampling: SamplingOptions) -> tuple[Generation, list[TokenStep]]:
        """One completion under `constraint`; the answer is checked against it."""
        gen, steps = self._complete(prompt, self._body(prompt, constraint, sampling))
        if constraint is not None and constraint.kind is ConstraintKind.CHOICE \
                and self.features.constraints is ConstraintApi.JSON_SCHEMA:
            gen = dataclasses.replace(gen, text=menu_answer(ConstraintApi.JSON_SCHEMA, gen.text))
            steps = unquoted_steps(steps)
        self._check(gen, constraint, sampling)
        return gen, steps

    def _menu_tokens(self, options: Sequence[str]) -> int:
        quotes = 3 if self.features.constraints is ConstraintApi.JSON_SCHEMA else 0
        return max_answer_tokens(options) + quotes  # the quotes and a space a schema allows

    def _answer_only(self, options: Sequence[str], gen: Generation,
                     option_bias: Mapping[str, float] | None) -> MenuResult:
        """A menu decision from an upstream that sends no logprobs: its answer, certain."""
        if option_bias and any(option_bias.values()):
            raise OptionBiasError("option_bias needs the options' probabilities; the upstream "
                                  "sends no logprobs")
        self._counters.add(menu_calls=1, inexact_menus=1.0)
        return MenuResult(choice=gen.text, margin=math.inf, usage=gen.usage,
                          probabilities={o: float(o == gen.text) for o in options})

    def _constraint_body(self, constraint: Constraint | None, *,
                         is_chat: bool) -> dict[str, Any]:
        """The fields that ask for `constraint` under the upstream's constraint API."""
        api = self.features.constraints
        if constraint is None or api is ConstraintApi.STRUCTURED_OUTPUTS:
            return constraint_body(constraint, is_chat=is_chat)
        if constraint.kind is ConstraintKind.CHOICE:
            return menu_body(api, constraint.choices)
        if constraint.kind is ConstraintKind.REGEX:
            raise RemoteFeatureError(f"the upstream offers no regex constraint (it answers "
                                     f"menus by {api.value}; regexes need structured_outputs)")
        return constraint_body(constraint, is_chat=True)  # response_format json_schema

    def _body(self, prompt: PromptInput, constraint: Constraint | None,
              sampling: SamplingOptions) -> dict[str, Any]:
        body: dict[str, Any] = {"max_tokens": sampling.max_tokens,
                                "temperature": sampling.temperature}
        if sampling.stop:
            body["stop"] = list(sampling.stop)
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        if sampling.top_logprobs is not None:
            if isinstance(prompt, Prompt):
                body |= {"logprobs": True, "top_logprobs": sampling.top_logprobs}
            else:
                body["logprobs"] = sampling.top_logprobs
        return body | self._constraint_body(constraint, is_chat=isinstance(prompt, Prompt))

    @staticmethod
    def _check(gen: Generation, constraint: Constraint | None,
               sampling: SamplingOptions) -> None:
        if sampling.top_logprobs is not None and gen.logprobs is None:
            raise RemoteFeatureError("the server sent no logprobs although they were asked for")
        if constraint is not None and gen.finish_reason == "stop":
            check_answer(gen.text, constraint)
        if constraint is not None and constraint.kind is ConstraintKind.CHOICE \
                and gen.finish_reason != "stop":
            raise RemoteEngineError(f"the server cut the menu answer off at {gen.text!r} "
                                    f"(finish_reason {gen.finish_reason!r})")

    def _complete(self, prompt: PromptInput,
                  body: dict[str, Any]) -> tuple[Generation, list[TokenStep]]:
        """One completion, and its tokens as steps with their exact bytes (when the server
        sends `bytes`: a byte-level token can be half a character)."""
        is_chat = isinstance(prompt, Prompt)
        body = {"model": self.info.model, **prompt_body(prompt), **body}
        started = time.perf_counter()
        path = "/v1/chat/completions" if is_chat else "/v1/completions"
        data = self._http.request("POST", path, body)
        return self._completion(data, is_chat=is_chat,
                                latency_ms=(time.perf_counter() - started) * 1e3)

    def _completion(self, data: Mapping[str, Any], *, is_chat: bool,
                    latency_ms: float) -> tuple[Generation, list[TokenStep]]:
        text, finish, logprobs, steps, usage = parse_completion(data, is_chat=is_chat,
                                                                latency_ms=latency_ms)
        if finish not in ("stop", "length"):
            raise RemoteEngineError(f"the server ended the answer with finish_reason "
                                    f"{finish!r}: {str(text)[:200]!r}")
        self._counters.add(prompt_tokens=usage.prompt_tokens, cached_tokens=usage.cached_tokens,
                           generated_tokens=usage.generated_tokens, latency_ms_total=latency_ms)
        return Generation(text=str(text or ""), finish_reason=finish, usage=usage,
                          logprobs=logprobs), steps

    def _served_model(self, model: str | None) -> EngineInfo:
        try:
            data = self._http.request("GET", "/v1/models")
            cards = {str(c["id"]): c for c in data["data"]}
        except (KeyError, TypeError, ValueError) as error:
            raise RemoteFeatureError(f"GET {self._http.base_url}/v1/models did not list "
                                     f"models: {error!r}") from error
        if not cards:
            raise RemoteFeatureError(f"GET {self._http.base_url}/v1/models lists no model")
        if model is not None and model not in cards:
            raise RemoteRejectedError(f"model {model!r} is not served at "
                                      f"{self._http.base_url}; it serves "
                                      f"{', '.join(sorted(cards))}", status=404)
        name = model if model is not None else next(iter(cards))
        max_len = cards[name].get("max_model_len")
        return EngineInfo(engine="remote", model=name,
                          max_context_tokens=int(max_len) if max_len else 0)

    def _warm_up(self, constraint: Constraint) -> None:
        body = {"max_tokens": 1, "temperature": 0.0,
                **self._constraint_body(constraint, is_chat=True)}
        self._complete(_WARM_UP_PROMPT, body)
