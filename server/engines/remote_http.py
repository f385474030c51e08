"""The remote engine's HTTP client: one pooled `httpx.Client`, JSON requests, and retries.

Each request carries the caller's W3C trace context (`traceparent`, from
`trace_context.py`), so the upstream's spans join the trace of the request that caused them.

Retried: connection failures, a dropped or reset connection, 429 (after its `Retry-After`),
502, 503 and 504, with exponential backoff and jitter. Every other error is raised at once: a
4xx is our request's fault and would fail again, and a timeout (`timeout_s`, end to end) would
only wait again. What is raised says what the HTTP layer needs to answer for it
(`remote_errors.py`): `RemoteUnavailableError` keeps the upstream's last status and its
`Retry-After`, `RemoteTimeoutError` the limit, `RemoteFeatureError` the missing feature, and a
prompt the upstream finds too long is a `ContextOverflowError`, as in the other engines.
"""

from __future__ import annotations

import json
import logging
import math
import random
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
from stackroute.runtime.errors import InputError
from stackroute.server.engines.base import ContextOverflowError, EngineError
from stackroute.server.engines.common import Counters
from stackroute.server.engines.remote_errors import (
    RemoteEngineError,
    RemoteFeatureError,
    RemoteRejectedError,
    RemoteTimeoutError,
    RemoteUnavailableError,
)
from stackroute.server.engines.trace_context import trace_headers

log = logging.getLogger(__name__)

RETRYABLE_STATUS = frozenset({429, 502, 503, 504})
# A request that never got an answer: safe to send again (menu calls are greedy, so a repeat
# that did reach the server answers the same).
_RETRYABLE_TRANSPORT = (httpx.NetworkError, httpx.ConnectTimeout, httpx.RemoteProtocolError)
_BASE_URL_HINT = ("is --base-url the server's address (http://host:port or "
                  "http://host:port/v1)?")
_CONTEXT_WORDS = re.compile(r"context length|context window|maximum context|too long|"
                            r"prompt_too_long|context_overflow", re.IGNORECASE)


@dataclass(frozen=True, kw_only=True)
class RemoteOptions:
    """The remote engine's options (the first seven are this client's)."""

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


def server_root(base_url: str) -> str:
    """The server's root for a base URL given either way: `http://host:8000` or
    `http://host:8000/v1` (the OpenAI client's convention); request paths (`/v1/models`,
    vLLM's `/tokenize`) are appended to the root.

    >>> server_root("http://127.0.0.1:8000/v1/")
    'http://127.0.0.1:8000'
    """
    try:
        url = httpx.URL(base_url)
    except (httpx.InvalidURL, TypeError) as e:
        raise InputError(f"the remote base URL must be an http:// or https:// URL such as "
                         f"http://host:8000/v1, got {base_url[:200]!r} ({e})") from e
    if url.scheme not in ("http", "https") or not url.host or url.query or url.fragment:
        raise InputError(f"the remote base URL must be an http:// or https:// URL such as "
                         f"http://host:8000/v1 (no query), got {base_url[:200]!r}")
    path = url.path.rstrip("/")
    if path == "/v1" or path.endswith("/v1"):
        path = path[: -len("/v1")]
    return str(url.copy_with(path=path or "/")).rstrip("/")


class RemoteClient:
    """JSON over a pool of connections to the upstream; thread-safe. Counts `requests` and
    `retries` in the engine's counters. `base_url`: the server's root or its `/v1`."""

    def __init__(self, base_url: str, *, api_key: str | None, options: RemoteOptions,
                 counters: Counters, transport: httpx.BaseTransport | None = None) -> None:
        self.options = o = options
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.root = server_root(base_url)
        self.client = httpx.Client(
            base_url=self.root, headers=headers, transport=transport,
            timeout=httpx.Timeout(o.timeout_s, connect=o.connect_timeout_s),
            limits=httpx.Limits(max_connections=o.max_connections,
                                max_keepalive_connections=o.max_connections))
        self._counters = counters
        self._random = random.Random()

    @property
    def base_url(self) -> str:
        return self.root

    def close(self) -> None:
        self.client.close()

    @property
    def is_closed(self) -> bool:
        return self.client.is_closed

    def request(self, method: str, path: str,
                body: dict[str, Any] | None = None) -> dict[str, Any]:
        """One request with retries on retryable failures only; the JSON body of a 2xx."""
        response = self._send(method, path, body, is_stream=False)
        return _json_of(response, f"{method} {self.client.base_url}{path}")

    def stream(self, path: str, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """A POST whose answer is server-sent events (`stream: true`): each `data:` payload
        as it arrives, up to `[DONE]`. Retried like `request` until the answer starts; never
        after (a half-sent answer cannot be taken back). An `error` event raises."""
        where = f"POST {self.client.base_url}{path}"
        response = self._send("POST", path, body, is_stream=True)
        try:
            for line in response.iter_lines():
                if not line.startswith("data:"):
                    continue  # event names, ids, comments (keep-alive pings), blank lines
                data = line.removeprefix("data:").strip()
                if data == "[DONE]":
                    return
                try:
                    event = json.loads(data)
                except ValueError as error:
                    raise RemoteFeatureError(f"{where}: a stream event that is not JSON: "
                                             f"{data[:200]!r}") from error
                if isinstance(event, dict) and "error" in event:
                    raise RemoteEngineError(f"{where}: the stream failed: "
                                            f"{json.dumps(event['error'])[:300]}")
                if not isinstance(event, dict):
                    raise RemoteFeatureError(f"{where}: expected JSON objects in the stream, "
                                             f"got {data[:200]}")
                yield event
        except httpx.TimeoutException as e:
            raise RemoteTimeoutError(f"{where}: the stream stalled for {self.options.timeout_s:g}"
                                     f" s ({type(e).__name__})") from e
        except httpx.HTTPError as e:
            raise RemoteEngineError(f"{where}: the stream broke: {type(e).__name__}: {e}") from e
        finally:
            response.close()

    def _send(self, method: str, path: str, body: dict[str, Any] | None, *,
              is_stream: bool) -> httpx.Response:
        """A 2xx response (its body unread when `is_stream`), after retries."""
        o = self.options
        where = f"{method} {self.root}{path}"  # every error names the URL it tried
        delay: float | None
        for attempt in range(o.max_retries + 1):
            self._counters.add(requests=1)
            status: int | None = None
            retry_after_s: float | None = None
            try:
                request = self.client.build_request(method, path, json=body,
                                                    headers=trace_headers())
                response = self.client.send(request, stream=is_stream)
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
                    return response
                if is_stream:  # the error's body, for its message; then the connection back
                    response.read()
                    response.close()
                if response.status_code not in RETRYABLE_STATUS:
                    raise _rejected(response, where)
                status, retry_after_s = response.status_code, _retry_after_s(response)
                problem = f"HTTP {status}: {_error_message(response)}"
                delay = self._retry_delay(retry_after_s, attempt)
            if attempt == o.max_retries or delay is None:
                break
            log.warning("remote %s %s failed (%s); retry %d in %.2f s", method, path, problem,
                        attempt + 1, delay)
            self._counters.add(retries=1)
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


def _rejected(response: httpx.Response, where: str) -> EngineError:
    message = _error_message(response)
    if response.status_code in (400, 413) and _CONTEXT_WORDS.search(message):
        return ContextOverflowError(f"the remote server: {message}")
    if re.search(r"structured_outputs|response_format|logprobs|unsupported|extra", message,
                 re.IGNORECASE) and response.status_code in (400, 422):
        return RemoteFeatureError(f"{where}: the server refused a field this engine needs "
                                  f"(HTTP {response.status_code}): {message}")
    if response.status_code == 404:
        message = f"{message} ({_BASE_URL_HINT})"
    return RemoteRejectedError(f"{where}: HTTP {response.status_code}: {message}",
                               status=response.status_code)
