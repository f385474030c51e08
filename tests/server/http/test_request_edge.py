"""Issue 15.8: what an unauthenticated or slow client can make the server hold. Driven as raw
ASGI calls, so the test sees exactly when the app reads the body."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from doubles import PlanEngine
from routing_app_kit import make_settings
from stackroute.server.http.app import create_app

SEVEN_MIB = 7 << 20


def scope(path: str = "/v1/catalogs", *, headers: dict[str, str] | None = None,
          content_length: int = SEVEN_MIB, method: str = "POST") -> dict[str, Any]:
    raw = {"content-type": "application/json", "content-length": str(content_length),
           **(headers or {})}
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
            "method": method, "scheme": "http", "path": path, "raw_path": path.encode(),
            "query_string": b"", "root_path": "", "server": ("127.0.0.1", 8000),
            "client": ("127.0.0.1", 5000),
            "headers": [(k.encode(), v.encode()) for k, v in raw.items()]}


class Client:
    """An ASGI client that sends its body slowly (or never) and records what it got."""

    def __init__(self, *, chunk: bytes = b"x" * 65536, num_chunks: int = 1,
                 stall_s: float = 0.0) -> None:
        self.chunk, self.num_chunks, self.stall_s = chunk, num_chunks, stall_s
        self.num_reads = 0
        self.status: int | None = None

    async def receive(self) -> dict[str, Any]:
        self.num_reads += 1
        if self.num_reads > self.num_chunks:
            await asyncio.sleep(self.stall_s)  # a slow client: the rest of the body is late
        return {"type": "http.request", "body": self.chunk, "more_body": True}

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]


def test_an_unauthenticated_upload_is_refused_before_its_body_is_read(tmp_path: Path) -> None:
    app = create_app(make_settings(tmp_path, api_key="secret"), engine=PlanEngine())
    client = Client(stall_s=60)
    asyncio.run(asyncio.wait_for(app(scope(), client.receive, client.send), 5))
    assert client.status == 401
    assert client.num_reads == 0


def test_a_body_that_stalls_is_cut_off(tmp_path: Path) -> None:
    app = create_app(make_settings(tmp_path, body_timeout_s=0.2), engine=PlanEngine())
    client = Client(num_chunks=2, stall_s=60)
    asyncio.run(asyncio.wait_for(app(scope(), client.receive, client.send), 5))
    assert client.status == 408


def test_requests_past_the_connection_limit_are_refused(tmp_path: Path) -> None:
    app = create_app(make_settings(tmp_path, max_connections=2, body_timeout_s=30),
                     engine=PlanEngine())

    async def main() -> list[int | None]:
        slow = [Client(stall_s=2.0) for _ in range(2)]
        held = [asyncio.create_task(app(scope(), c.receive, c.send)) for c in slow]
        await asyncio.sleep(0.2)  # both are now reading their bodies
        extra = Client()
        await asyncio.wait_for(app(scope("/healthz", method="GET"), extra.receive, extra.send), 5)
        for task in held:
            task.cancel()
        await asyncio.gather(*held, return_exceptions=True)
        return [extra.status]

    assert asyncio.run(main()) == [503]


@pytest.fixture(autouse=True)
def _no_env_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STACKROUTE_API_KEY", raising=False)
