"""server/http/sse.py: framing, keep-alive comments while the source is idle, and the source
closed when the stream ends. Served by a real app through Starlette's TestClient."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from stackroute.server.http.sse import KEEPALIVE_COMMENT, SseEvent, sse_response


@pytest.mark.parametrize(("event", "wire"), [
    (SseEvent({"a": 1}), b'data: {"a": 1}\n\n'),
    (SseEvent("[DONE]"), b"data: [DONE]\n\n"),
    (SseEvent({"s": "caf\u00e9"}, event="transition", id="7"),
     'event: transition\ndata: {"s": "caf\u00e9"}\nid: 7\n\n'.encode()),
    (SseEvent("two\nlines"), b"data: two\ndata: lines\n\n"),
    (SseEvent("cr\r\nlf\rx"), b"data: cr\ndata: lf\ndata: x\n\n"),
    (SseEvent("sep\u2028kept"), "data: sep\u2028kept\n\n".encode()),  # not an SSE line end
    (SseEvent(""), b"data: \n\n"),
    (SseEvent({"p": float("nan"), "q": [float("inf"), 1.5]}),
     b'data: {"p": null, "q": [null, 1.5]}\n\n'),
])
def test_encode(event: SseEvent, wire: bytes) -> None:
    assert event.encode() == wire


@pytest.mark.parametrize("bad", [{"event": "a\nb"}, {"id": "1\r"}, {"id": "x\0"}])
def test_multi_line_event_or_id_is_refused(bad: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="must be one line"):
        SseEvent("x", **bad)


def test_keepalive_must_be_positive() -> None:
    async def nothing() -> AsyncIterator[SseEvent]:
        yield SseEvent("x")

    with pytest.raises(ValueError, match="keepalive_s must be > 0 seconds, got 0"):
        sse_response(nothing(), keepalive_s=0)


def test_stream_pings_while_idle_and_closes_the_source() -> None:
    closed: list[str] = []

    async def slow() -> AsyncIterator[SseEvent]:
        try:
            yield SseEvent({"n": 0}, event="tick", id="0")
            await asyncio.sleep(0.35)  # idle: at least two pings at 0.1 s
            yield SseEvent({"n": 1}, event="tick", id="1")
        finally:
            closed.append("source closed")

    app = FastAPI()

    @app.get("/events")
    async def events() -> object:
        return sse_response(slow(), keepalive_s=0.1)

    with TestClient(app) as client, client.stream("GET", "/events") as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        assert r.headers["cache-control"] == "no-cache"
        body = b"".join(r.iter_bytes())
    frames = body.split(b"\n\n")[:-1]
    assert frames[0] == b'event: tick\ndata: {"n": 0}\nid: 0'
    assert frames[-1] == b'event: tick\ndata: {"n": 1}\nid: 1'
    pings = frames[1:-1]
    assert len(pings) >= 2 and set(pings) == {KEEPALIVE_COMMENT.strip()}, frames
    assert json.loads(frames[-1].split(b"data: ")[1].split(b"\n")[0]) == {"n": 1}
    assert closed == ["source closed"]


def test_closing_the_stream_mid_wait_closes_the_source() -> None:
    """What Starlette does when the client goes away: the body iterator is closed while the
    source is still waiting for its next event; the source's `finally` must still run."""
    closed: list[str] = []

    async def endless() -> AsyncIterator[SseEvent]:
        try:
            yield SseEvent("first")
            await asyncio.sleep(3600)
            yield SseEvent("never")
        finally:
            closed.append("source closed")

    async def consume() -> list[bytes]:
        body = sse_response(endless(), keepalive_s=0.05).body_iterator
        assert isinstance(body, AsyncIterator)
        got = [await anext(body), await anext(body)]  # the event, then a ping
        await body.aclose()  # type: ignore[attr-defined]
        return got

    assert asyncio.run(consume()) == [b"data: first\n\n", KEEPALIVE_COMMENT]
    assert closed == ["source closed"]
