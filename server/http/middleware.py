"""ASGI middleware: request ids with one structured log line per request, the body limit and
body-read timeout, the limit on requests in flight, and the W3C trace context.

Both are plain ASGI (not Starlette's BaseHTTPMiddleware), so streamed responses pass through
untouched and nothing is buffered but a request body, which is capped.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from collections.abc import Callable
from typing import Any

from stackroute.server.engines.trace_context import TRACEPARENT, is_valid_traceparent
from stackroute.server.http.asgi_middleware import HttpMiddleware, refuse
from stackroute.server.http.errors import internal_error_response
from stackroute.server.telemetry import Telemetry, context_from_traceparent, traceparent_of
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("stackroute.server.access")

REQUEST_ID_HEADER = "x-request-id"
_CLIENT_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")  # a caller's id we can log safely


class RequestContextMiddleware(HttpMiddleware):
    """Give each request an id (the caller's `X-Request-ID` when it is safe to log, else a
    fresh one), echo it in the response, log one JSON line when the request ends, and turn an
    unhandled exception into a 500 that shows the id, with the traceback only in the log."""

    def __init__(self, app: ASGIApp, *,
                 on_finish: Callable[[Scope, int, float], None] | None = None) -> None:
        self.app = app
        self.on_finish = on_finish

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        request_id = _request_id(scope)
        scope.setdefault("state", {})["request_id"] = request_id
        started = time.perf_counter()
        status = 500
        is_started = False

        async def send_with_id(message: Message) -> None:
            nonlocal status, is_started
            if message["type"] == "http.response.start":
                status = int(message["status"])
                is_started = True
                headers = list(message.get("headers", []))
                headers.append((REQUEST_ID_HEADER.encode(), request_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception:
            log.exception("unhandled error", extra={"request_id": request_id})
            if not is_started:
                await internal_error_response(request_id)(scope, receive, send_with_id)
        finally:
            latency_s = time.perf_counter() - started
            log.info("request", extra={
                "request_id": request_id, "method": scope["method"][:16],
                "path": scope["path"][:512],
                "status": status, "latency_ms": round(latency_s * 1e3, 3)})
            if self.on_finish is not None:
                self.on_finish(scope, status, latency_s)


class BodyLimitMiddleware(HttpMiddleware):
    """Refuse request bodies over `max_body_bytes` with 413, before any handler runs.

    A declared Content-Length is checked at once; a chunked body is read up to the limit and
    then replayed to the app, so at most `max_body_bytes` of it is ever held."""

    def __init__(self, app: ASGIApp, *, max_body_bytes: int,
                 body_timeout_s: float | None = None) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.body_timeout_s = body_timeout_s  # the whole body must arrive within this

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] in {"GET", "HEAD", "OPTIONS"}:
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_body_bytes:
            await self._refuse(scope, receive, send, declared)
            return
        chunks: list[bytes] = []
        num_bytes = 0
        deadline = None if self.body_timeout_s is None else \
            asyncio.get_running_loop().time() + self.body_timeout_s
        while True:
            try:
                message = await asyncio.wait_for(receive(), None if deadline is None else max(
                    deadline - asyncio.get_running_loop().time(), 0.0))
            except TimeoutError:
                await self._too_slow(scope, receive, send)
                return
            if message["type"] != "http.request":  # the client went away
                return
            chunk = message.get("body", b"")
            num_bytes += len(chunk)
            if num_bytes > self.max_body_bytes:
                await self._refuse(scope, receive, send, None)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        is_replayed = False

        async def replay() -> Message:
            nonlocal is_replayed
            if not is_replayed:
                is_replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: wait for a disconnect, as servers do

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send,
                      declared: int | None) -> None:
        size = f"{declared} bytes" if declared is not None else "more than that"
        await refuse(scope, receive, send, 413, code="request_too_large",
                     message=f"request body is too large: the limit is {self.max_body_bytes} "
                             f"bytes; got {size}", headers={"Connection": "close"})


    async def _too_slow(self, scope: Scope, receive: Receive, send: Send) -> None:
        await refuse(scope, receive, send, 408, code="request_timeout",
                     message=f"the request body did not arrive within {self.body_timeout_s:g} s",
                     headers={"Connection": "close"})


class ConnectionLimitMiddleware(HttpMiddleware):
    """At most `max_connections` HTTP requests in flight; more are answered 503 at once
    (a slow client's request counts until its body is read and its answer sent)."""

    def __init__(self, app: ASGIApp, *, max_connections: int) -> None:
        self.app = app
        self.max_connections = max_connections
        self.num_active = 0

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.num_active >= self.max_connections:
            await refuse(scope, receive, send, 503, code="too_many_connections",
                         message=f"{self.num_active} requests are in flight, the limit is "
                                 f"{self.max_connections}; retry later",
                         headers={"Retry-After": "1", "Connection": "close"})
            return
        self.num_active += 1  # one event loop: no lock needed
        try:
            await self.app(scope, receive, send)
        finally:
            self.num_active -= 1


class TraceContextMiddleware(HttpMiddleware):
    """The caller's `traceparent` (when well-formed) is the parent of this request's server
    span, with telemetry on, and the current OpenTelemetry context while the request runs
    (so a session it starts hangs under it). The trace context the engine forwards on its own
    requests (`engines/trace_context.py`) is this span's; with telemetry off, the caller's
    `traceparent` unchanged, and no OpenTelemetry module is imported."""

    def __init__(self, app: ASGIApp, *, telemetry: Telemetry) -> None:
        self.app = app
        self.telemetry = telemetry

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        incoming = _traceparent(scope)
        tracer = self.telemetry.tracer
        if tracer is None:
            token = TRACEPARENT.set(incoming)
            try:
                await self.app(scope, receive, send)
            finally:
                TRACEPARENT.reset(token)
            return
        from opentelemetry import context, trace

        parent = context_from_traceparent(incoming)
        method = scope["method"][:16]
        span = tracer.start_span(f"{method} {scope['path'][:128]}", context=parent,
                                 kind=trace.SpanKind.SERVER, attributes={
                                     "http.request.method": method,
                                     "url.path": scope["path"][:512]})
        otel_token = context.attach(trace.set_span_in_context(span, parent))
        token = TRACEPARENT.set(traceparent_of(span))
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            route = route_template(scope)
            if route != "<unmatched>":
                span.update_name(f"{method} {route}")
                span.set_attribute("http.route", route)
            span.set_attribute("http.response.status_code", status)
            if status >= 500:
                span.set_status(trace.Status(trace.StatusCode.ERROR))
            span.end()
            TRACEPARENT.reset(token)
            context.detach(otel_token)


def _traceparent(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"traceparent":
            text = bytes(value).decode("latin-1").strip().lower()
            return text if is_valid_traceparent(text) else None
    return None


def _request_id(scope: Scope) -> str:
    for name, value in scope.get("headers", []):
        if name == REQUEST_ID_HEADER.encode():
            text = bytes(value).decode("latin-1")
            if _CLIENT_ID.match(text):
                return text
            break
    return uuid.uuid4().hex


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def route_template(scope: Scope) -> str:
    """The matched route's path template (`/v1/sessions/{id}`), for low-cardinality labels."""
    route: Any = scope.get("route")
    path = getattr(route, "path", None)
    return str(path) if path else "<unmatched>"
