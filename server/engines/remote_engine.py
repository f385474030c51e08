"""The remote engine: any OpenAI-compatible server that supports vLLM's `structured_outputs`
and logprobs (`stackroute serve` itself, vLLM; SGLang for JSON), over pooled HTTP.

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

Retries: connection failures, a dropped or reset connection, 429 (after its `Retry-After`),
502, 503 and 504, with exponential backoff and jitter. Every other error is raised at once: a
4xx is our request's fault and would fail again, and a timeout (`timeout_s`, end to end) would
only wait again. What is raised says what the HTTP layer needs to answer for it (see
`server/http/errors.py`): `RemoteUnavailableError` keeps the upstream's last status and its
`Retry-After`, `RemoteTimeoutError` the limit, `RemoteFeatureError` the missing feature.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import re
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx
from stackroute.runtime.errors import InputError, StackrouteError
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
    MASKED_LOGPROB,
    NEAR_TIE_MARGIN,
    TokenStep,
    check_menu,
    decide_from_answer,
    max_answer_tokens,
)

log = logging.getLogger(__name__)

API_KEY_ENV = "STACKROUTE_REMOTE_API_KEY"
RETRYABLE_STATUS = frozenset({429, 502, 503, 504})
OVERLOADED_STATUS = frozenset({429, 503})  # "busy, come back later", as opposed to broken
# A request that never got an answer: safe to send again (menu calls are greedy, so a repeat
# that did reach the server answers the same).
_RETRYABLE_TRANSPORT = (httpx.NetworkError, httpx.ConnectTimeout, httpx.RemoteProtocolError)
_CONTEXT_WORDS = re.compile(r"context length|context window|maximum context|too long|"
                            r"prompt_too_long|context_overflow", re.IGNORECASE)
_WARM_UP_PROMPT = Prompt((Message("user", "Warm-up: answer with one option."),))


class RemoteEngineError(StackrouteError):
    """The remote server failed or misbehaved: neither the user's input nor our bug."""

    code = "remote_engine_error"


class RemoteUnavailableError(RemoteEngineError):
    """No answer after every retry (connection refused, 429/502/503/504 throughout).
    `last_status` is the upstream's last HTTP status (None: no response at all) and
    `retry_after_s` the `Retry-After` it sent with it, in seconds, if any. `is_overloaded`:
    the upstream is busy rather than broken (it said 429 or 503, or every pooled connection
    to it is in use)."""

    code = "remote_unavailable"

    def __init__(self, message: str, *, last_status: int | None = None,
                 retry_after_s: float | None = None, is_overloaded: bool | None = None) -> None:
        self.last_status = last_status
        self.retry_after_s = retry_after_s
        self.is_overloaded = last_status in OVERLOADED_STATUS if is_overloaded is None \
            else is_overloaded
        super().__init__(message)


class RemoteTimeoutError(RemoteEngineError):
    """The upstream did not answer within `RemoteOptions.timeout_s` (not retried)."""

    code = "remote_timeout"


class RemoteRejectedError(RemoteEngineError):
    """The server refused the request (a 4xx other than 429)."""

    code = "remote_rejected"

    def __init__(self, message: str, *, status: int) -> None:
        self.status = status
        super().__init__(message)


class RemoteFeatureError(RemoteEngineError):
    """The server lacks something this engine needs (it ignored `structured_outputs`, sent
    no logprobs, refused a field), so its answers cannot be trusted as menu decisions."""

    code = "remote_feature_missing"


@dataclass(frozen=True, kw_only=True)
class RemoteOptions:
    timeout_s: float = 120.0  # one response, end to end (a long JSON generation on a busy GPU)
    connect_timeout_s: float = 5.0
    max_retries: int = 4
    backoff_s: float = 0.25  # first retry's delay; doubles each retry, with jitter
    max_backoff_s: float = 8.0
    max_retry_after_s: float = 30.0  # a longer Retry-After gives up at once
    max_connections: int = 64
    top_logprobs: int = 20  # vLLM's default limit (`max_logprobs`); more is a 400 there
    is_warm_up_enabled: bool = True  # prepare() sends each constraint once (compile it there)
    num_warm_up_threads: int = 8


class RemoteEngine:
    """An `Engine` over HTTP; thread-safe (one pooled `httpx.Client` shared by all calls)."""

    def __init__(self, *, base_url: str, model: str | None = None, api_key: str | None = None,
                 is_cache_enabled: bool = True, options: RemoteOptions | None = None,
                 transport: httpx.BaseTransport | None = None) -> None:
        if not is_cache_enabled:
            raise InputError("a remote server's prefix cache is the server's own setting "
                             "(vLLM: --no-enable-prefix-caching); it cannot be turned off "
                             "per client")
        self.options = options or RemoteOptions()
        key = api_key if api_key is not None else os.environ.get(API_KEY_ENV)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        o = self.options
        self._client = httpx.Client(
            base_url=base_url.rstrip("/"), headers=headers, transport=transport,
            timeout=httpx.Timeout(o.timeout_s, connect=o.connect_timeout_s),
            limits=httpx.Limits(max_connections=o.max_connections,
                                max_keepalive_connections=o.max_connections))
        self._random = random.Random()
        self._lock = threading.Lock()
        self._counters = dict.fromkeys(
            ("requests", "retries", "menu_calls", "generate_calls", "inexact_menus",
             "near_tie_menus", "prompt_tokens", "cached_tokens", "generated_tokens",
             "latency_ms_total", "warm_up_ms"), 0.0)
        self._has_tokenize: bool | None = None
        self.info = self._served_model(model)

    def close(self) -> None:
        """Close the connection pool (idempotent)."""
        self._client.close()

    @property
    def is_closed(self) -> bool:
        return self._client.is_closed

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
            body: dict[str, Any] = {"model": self.info.model, **_prompt_body(prompt)}
            if isinstance(prompt, Prompt):
                body["add_generation_prompt"] = True
            try:
                data = self._request("POST", "/tokenize", body)
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
        schemas = [Constraint.json(leaf.parameters or {"type": "object", "properties": {}})
                   for leaf in tree.leaves()]
        started = time.perf_counter()
        if self.options.is_warm_up_enabled:
            with ThreadPoolExecutor(self.options.num_warm_up_threads) as pool:
                list(pool.map(self._warm_up, menus + schemas))  # raises the first failure
        elapsed_ms = (time.perf_counter() - started) * 1e3
        self._count(warm_up_ms=elapsed_ms)
        return PrepareStats(num_menus=len(menus), num_schemas=len(schemas),
                            compile_ms=elapsed_ms)

    def choose(self, prompt: Prompt, options: Sequence[str], *,
               option_bias: Mapping[str, float] | None = None) -> MenuResult:
        options = check_menu(options)
        if len(options) == 1:  # nothing to decide: no request
            return MenuResult(choice=options[0], probabilities={options[0]: 1.0},
                              margin=math.inf, usage=Usage())
        gen, steps = self._constrained(prompt, Constraint.choice(options), SamplingOptions(
            max_tokens=max_answer_tokens(options), top_logprobs=self.options.top_logprobs))
        decision = decide_from_answer(options, gen.text, steps, option_bias=option_bias)
        self._count(menu_calls=1, inexact_menus=float(not decision.is_exact),
                    near_tie_menus=float(decision.margin < NEAR_TIE_MARGIN))
        return MenuResult(choice=decision.choice, probabilities=decision.probabilities,
                          margin=decision.margin, usage=gen.usage)

    def generate(self, prompt: PromptInput, *, constraint: Constraint | None = None,
                 sampling: SamplingOptions | None = None) -> Generation:
        sampling = sampling or SamplingOptions()
        if constraint is not None and constraint.kind is ConstraintKind.CHOICE:
            check_menu(constraint.choices)
        gen, _ = self._constrained(prompt, constraint, sampling)
        self._count(generate_calls=1)
        return gen

    def metrics(self) -> dict[str, float]:
        with self._lock:
            return dict(self._counters)

    # -- requests ----------------------------------------------------------------------------------
    def _constrained(self, prompt: PromptInput, constraint: Constraint | None,
                     sampling: SamplingOptions) -> tuple[Generation, list[TokenStep]]:
        """One completion under `constraint`; the answer is checked against it."""
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
        body |= _constraint_body(constraint, is_chat=isinstance(prompt, Prompt))
        gen, steps = self._complete(prompt, body)
        if sampling.top_logprobs is not None and gen.logprobs is None:
            raise RemoteFeatureError("the server sent no logprobs although they were asked for")
        if constraint is not None and gen.finish_reason == "stop":
            _check_answer(gen.text, constraint)
        if constraint is not None and constraint.kind is ConstraintKind.CHOICE \
                and gen.finish_reason != "stop":
            raise RemoteEngineError(f"the server cut the menu answer off at {gen.text!r} "
                                    f"(finish_reason {gen.finish_reason!r})")
        return gen, steps

    def _complete(self, prompt: PromptInput,
                  body: dict[str, Any]) -> tuple[Generation, list[TokenStep]]:
        """One completion, and its tokens as steps with their exact bytes (when the server
        sends `bytes`: a byte-level token can be half a character)."""
        is_chat = isinstance(prompt, Prompt)
        body = {"model": self.info.model, **_prompt_body(prompt), **body}
        started = time.perf_counter()
        path = "/v1/chat/completions" if is_chat else "/v1/completions"
        data = self._request("POST", path, body)
        latency_ms = (time.perf_counter() - started) * 1e3
        try:
            choice = data["choices"][0]
            text = choice["message"]["content"] if is_chat else choice["text"]
            finish = choice.get("finish_reason")
            if is_chat:
                logprobs, steps = _chat_logprobs(choice)
            else:
                logprobs = _completion_logprobs(choice)
                steps = [TokenStep(e.token.encode(), e.logprob, tuple(
                    (t.encode(), lp) for t, lp in e.top)) for e in logprobs or ()]
            usage = _usage(data.get("usage") or {}, latency_ms)
        except (KeyError, IndexError, TypeError, ValueError) as error:
            raise RemoteFeatureError(f"the server's completion has an unexpected shape "
                                     f"({error!r}): {json.dumps(data)[:300]}") from error
        if finish not in ("stop", "length"):
            raise RemoteEngineError(f"the server ended the answer with finish_reason "
                                    f"{finish!r}: {str(text)[:200]!r}")
        self._count(prompt_tokens=usage.prompt_tokens, cached_tokens=usage.cached_tokens,
                    generated_tokens=usage.generated_tokens, latency_ms_total=latency_ms)
        return Generation(text=str(text or ""), finish_reason=finish, usage=usage,
                          logprobs=logprobs), steps

    def _request(self, method: str, path: str,
                 body: dict[str, Any] | None = None) -> dict[str, Any]:
        """One request with retries on retryable failures only; the JSON body of a 2xx."""
        o = self.options
        where = f"{method} {self._client.base_url}{path}"
        delay: float | None
        for attempt in range(o.max_retries + 1):
            self._count(requests=1)
            status: int | None = None
            retry_after_s: float | None = None
            try:
                response = self._client.request(method, path, json=body)
            except _RETRYABLE_TRANSPORT as e:
                problem, delay = f"{type(e).__name__}: {e}", self._backoff(attempt)
            except httpx.PoolTimeout as e:  # every pooled connection busy for timeout_s
                raise RemoteUnavailableError(
                    f"{where}: no free connection in {o.timeout_s:g} s (all "
                    f"{o.max_connections} busy)", is_overloaded=True) from e
            except httpx.TimeoutException as e:
                raise RemoteTimeoutError(f"{where}: no answer within {o.timeout_s:g} s "
                                         f"({type(e).__name__})") from e
            except httpx.HTTPError as e:  # a proxy or protocol failure sending again won't fix
                raise RemoteEngineError(f"{where}: {type(e).__name__}: {e}") from e
            else:
                if response.status_code < 400:
                    return _json_of(response, where)
                if response.status_code not in RETRYABLE_STATUS:
                    raise _rejected(response)
                status, retry_after_s = response.status_code, _retry_after_s(response)
                problem = f"HTTP {status}: {_error_message(response)}"
                delay = self._retry_delay(retry_after_s, attempt)
            if attempt == o.max_retries or delay is None:
                break
            log.warning("remote %s %s failed (%s); retry %d in %.2f s", method, path, problem,
                        attempt + 1, delay)
            self._count(retries=1)
            time.sleep(delay)
        raise RemoteUnavailableError(f"{where}: no answer after {attempt + 1} attempt(s); "
                                     f"last: {problem}", last_status=status,
                                     retry_after_s=retry_after_s)

    def _backoff(self, attempt: int) -> float:
        delay = min(self.options.max_backoff_s, self.options.backoff_s * 2.0 ** attempt)
        return float(delay * (0.5 + 0.5 * self._random.random()))

    def _retry_delay(self, retry_after_s: float | None, attempt: int) -> float | None:
        """The server's `Retry-After` (None: longer than we wait), else backoff."""
        if retry_after_s is None:
            return self._backoff(attempt)
        return retry_after_s if retry_after_s <= self.options.max_retry_after_s else None

    def _served_model(self, model: str | None) -> EngineInfo:
        try:
            data = self._request("GET", "/v1/models")
            cards = {str(c["id"]): c for c in data["data"]}
        except (KeyError, TypeError, ValueError) as error:
            raise RemoteFeatureError(f"GET /v1/models did not list models: {error!r}") from error
        if not cards:
            raise RemoteFeatureError("GET /v1/models lists no model")
        if model is not None and model not in cards:
            raise RemoteRejectedError(f"model {model!r} is not served at "
                                      f"{self._client.base_url}; it serves "
                                      f"{', '.join(sorted(cards))}", status=404)
        name = model if model is not None else next(iter(cards))
        max_len = cards[name].get("max_model_len")
        return EngineInfo(engine="remote", model=name,
                          max_context_tokens=int(max_len) if max_len else 0)

    def _warm_up(self, constraint: Constraint) -> None:
        body = {"max_tokens": 1, "temperature": 0.0,
                **_constraint_body(constraint, is_chat=True)}
        self._complete(_WARM_UP_PROMPT, body)

    def _count(self, **amounts: float) -> None:
        with self._lock:
            for name, amount in amounts.items():
                self._counters[name] += amount


# -- request and response shapes -------------------------------------------------------------------
def _prompt_body(prompt: PromptInput) -> dict[str, Any]:
    if isinstance(prompt, Prompt):
        return {"messages": [m.to_dict() for m in prompt.messages]}
    return {"prompt": prompt}


def _constraint_body(constraint: Constraint | None, *, is_chat: bool) -> dict[str, Any]:
    """vLLM's `structured_outputs` for a choice or a regex; OpenAI's `response_format` for a
    JSON schema in chat (the most widely served form), `structured_outputs` otherwise."""
    if constraint is None:
        return {}
    if constraint.kind is ConstraintKind.CHOICE:
        return {"structured_outputs": {"choice": list(constraint.choices)}}
    if constraint.kind is ConstraintKind.REGEX:
        return {"structured_outputs": {"regex": constraint.pattern or ""}}
    schema = dict(constraint.schema or {"type": "object"})
    if is_chat:
        return {"response_format": {"type": "json_schema", "json_schema": {
            "name": "output", "schema": schema, "strict": True}}}
    return {"structured_outputs": {"json": schema}}


def _check_answer(text: str, constraint: Constraint) -> None:
    """A finished answer that breaks its constraint: the server ignored the constraint."""
    problem = None
    if constraint.kind is ConstraintKind.CHOICE and text not in constraint.choices:
        problem = f"answered {text[:200]!r}, which is not one of the {len(constraint.choices)} " \
                  "options"
    elif constraint.kind is ConstraintKind.JSON:
        import jsonschema

        try:
            jsonschema.validate(json.loads(text), dict(constraint.schema or {}))
        except (ValueError, jsonschema.ValidationError) as error:
            problem = f"answered {text[:200]!r}, which does not match the JSON schema " \
                      f"({str(error).splitlines()[0]})"
    elif constraint.kind is ConstraintKind.REGEX:
        try:
            pattern = re.compile(constraint.pattern or "")
        except re.error:
            pattern = None  # a grammar dialect Python's re does not read: trust the server
        if pattern is not None and pattern.fullmatch(text) is None:
            problem = f"answered {text[:200]!r}, which does not match the regex"
    if problem is not None:
        raise RemoteFeatureError(f"the server ignored the {constraint.kind.value} constraint: "
                                 f"{problem} (it needs vLLM's structured_outputs; the old "
                                 "guided_* fields are silently ignored by vLLM ≥ 0.12)")


def _lp(value: Any) -> float:
    number = float(value)
    return -math.inf if number <= MASKED_LOGPROB else number


def _bytes_of(entry: Mapping[str, Any]) -> bytes:
    raw = entry.get("bytes")
    return bytes(raw) if raw is not None else str(entry["token"]).encode()


def _chat_logprobs(choice: Mapping[str, Any],
                   ) -> tuple[tuple[TokenLogprob, ...] | None, list[TokenStep]]:
    content = (choice.get("logprobs") or {}).get("content")
    if content is None:
        return None, []
    entries, steps = [], []
    for e in content:
        top = e.get("top_logprobs") or ()
        entries.append(TokenLogprob(token=str(e["token"]), logprob=_lp(e["logprob"]),
                                    top=tuple((str(t["token"]), _lp(t["logprob"]))
                                              for t in top)))
        steps.append(TokenStep(_bytes_of(e), _lp(e["logprob"]),
                               tuple((_bytes_of(t), _lp(t["logprob"])) for t in top)))
    return tuple(entries), steps


def _completion_logprobs(choice: Mapping[str, Any]) -> tuple[TokenLogprob, ...] | None:
    raw = choice.get("logprobs")
    if not raw:
        return None
    tops = raw.get("top_logprobs") or [None] * len(raw["tokens"])
    return tuple(TokenLogprob(token=str(t), logprob=_lp(lp),
                              top=tuple((str(k), _lp(v)) for k, v in (top or {}).items()))
                 for t, lp, top in zip(raw["tokens"], raw["token_logprobs"], tops, strict=True))


def _usage(raw: Mapping[str, Any], latency_ms: float) -> Usage:
    prompt = int(raw.get("prompt_tokens") or 0)
    cached = int((raw.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    return Usage(model_calls=1, prompt_tokens=prompt, prefill_tokens=max(0, prompt - cached),
                 cached_tokens=cached, generated_tokens=int(raw.get("completion_tokens") or 0),
                 latency_ms=latency_ms)


def _retry_after_s(response: httpx.Response) -> float | None:
    """`Retry-After` in seconds when it is a number of seconds (an HTTP date: None)."""
    try:
        seconds = float(response.headers.get("retry-after", ""))
    except ValueError:
        return None
    return seconds if 0 <= seconds < math.inf else None


def _json_of(response: httpx.Response, where: str) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError as error:
        raise RemoteFeatureError(f"{where}: HTTP {response.status_code} but not the JSON an "
                                 f"OpenAI-compatible server sends: {response.text[:200]!r}"
                                 ) from error
    if not isinstance(data, dict):
        raise RemoteFeatureError(f"{where}: expected a JSON object, got {json.dumps(data)[:200]}")
    return data


def _error_message(response: httpx.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        return response.text[:300]
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        return str(error.get("message") or error)[:500]
    if isinstance(data, dict) and "message" in data:  # vLLM's older {"object": "error", ...}
        return str(data["message"])[:500]
    return json.dumps(data)[:300]


def _rejected(response: httpx.Response) -> StackrouteError:
    message = _error_message(response)
    path = response.request.url.path
    if response.status_code in (400, 413) and _CONTEXT_WORDS.search(message):
        return ContextOverflowError(f"the remote server: {message}")
    if re.search(r"structured_outputs|response_format|logprobs|unsupported|extra", message,
                 re.IGNORECASE) and response.status_code in (400, 422):
        return RemoteFeatureError(f"{path}: the server refused a field this engine needs "
                                  f"(HTTP {response.status_code}): {message}")
    return RemoteRejectedError(f"{path}: HTTP {response.status_code}: {message}",
                               status=response.status_code)
