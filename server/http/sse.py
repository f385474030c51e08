"""Server-sent events over a plain `StreamingResponse` (no `fastapi.sse`, so the fastapi range
can include the one vLLM pins).

    async def events() -> AsyncIterator[SseEvent]:
        yield SseEvent({"seq": 0}, event="transition", id="0")
        yield SseEvent("[DONE]")          # a str goes out as-is; anything else as JSON
    return sse_response(events())

Wire format (https://html.spec.whatwg.org/multipage/server-sent-events.html): `event:`, one
`data:` line per line of the payload, `id:`, then a blank line. While the source is idle the
response sends a `: ping` comment every `keepalive_s` seconds so proxies keep the connection
open; the wait for the next event is never cancelled by a ping (the source sees no
`CancelledError` between its events). When the client goes away, the source is closed
(`aclose`), so its `finally` blocks run."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

from stackroute.server.service.store import finite
from starlette.responses import StreamingResponse

KEEPALIVE_S = 15.0  # seconds of silence before a `: ping` comment
KEEPALIVE_COMMENT = b": ping\n\n"
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}  # nginx: no buffering
# OpenAPI `responses=` entry for a route that answers with `sse_response`
SSE_OPENAPI = {200: {"description": "server-sent events (text/event-stream)",
                     "content": {"text/event-stream": {"schema": {"type": "string"}}}}}


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One event. `data`: a `str` is sent as-is (e.g. OpenAI's `[DONE]`); anything else is
    JSON-encoded (dicts, lists, numbers, pydantic models via `model_dump(mode="json")`).
    `event` and `id` must be single lines; `id` is what a reconnecting browser sends back
    as `Last-Event-ID`."""

    data: Any
    event: str | None = None
    id: str | None = None

    def __post_init__(self) -> None:
        for name in ("event", "id"):
            value = getattr(self, name)
            if value is not None and ("\n" in value or "\r" in value or "\0" in value):
                raise ValueError(f"SSE {name!r} must be one line without NUL, got {value!r}")

    def encode(self) -> bytes:
        """The event's bytes on the wire, ending with the blank line.

        >>> SseEvent({"a": 1}, event="x", id="3").encode()
        b'event: x\\ndata: {"a": 1}\\nid: 3\\n\\n'
        """
        lines = [] if self.event is None else [f"event: {self.event}"]
        # only \r\n, \r and \n end a line in SSE (str.splitlines would also split U+2028)
        text = _payload(self.data).replace("\r\n", "\n").replace("\r", "\n")
        lines += [f"data: {line}" for line in text.split("\n")]
        if self.id is not None:
            lines.append(f"id: {self.id}")
        return ("\n".join(lines) + "\n\n").encode("utf-8")


def _payload(data: Any) -> str:
    if isinstance(data, str):
        return data
    if hasattr(data, "model_dump"):  # a pydantic model
        data = data.model_dump(mode="json")
    try:
        return json.dumps(data, ensure_ascii=False, allow_nan=False)
    except ValueError:  # NaN/inf is not JSON: send null, as fastapi's own encoder does
        return json.dumps(finite(data), ensure_ascii=False, allow_nan=False)


async def _with_keepalive(events: AsyncIterator[SseEvent], keepalive_s: float,
                          ) -> AsyncIterator[bytes]:
    source = aiter(events)
    pending: asyncio.Future[SseEvent] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(source))
            done, _ = await asyncio.wait({pending}, timeout=keepalive_s)
            if not done:  # idle: ping, keep waiting on the same __anext__
                yield KEEPALIVE_COMMENT
                continue
            try:
                event = pending.result()
            except StopAsyncIteration:
                return
            finally:
                pending = None
            yield event.encode()
    finally:  # the client went away (or the source ended): stop the source, run its finally
        if pending is not None:
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await pending  # a generator still inside __anext__ cannot be closed
        aclose = getattr(source, "aclose", None)
        if aclose is not None:
            await aclose()


def sse_response(events: AsyncIterator[SseEvent], *, keepalive_s: float = KEEPALIVE_S,
                 status_code: int = 200,
                 headers: Mapping[str, str] | None = None) -> StreamingResponse:
    """A `text/event-stream` response that sends each event as it arrives (`headers` are
    sent besides the stream's own)."""
    if keepalive_s <= 0:
        raise ValueError(f"keepalive_s must be > 0 seconds, got {keepalive_s}")
    return StreamingResponse(_with_keepalive(events, keepalive_s), status_code=status_code,
                             media_type="text/event-stream",
                             headers={**(headers or {}), **SSE_HEADERS})
