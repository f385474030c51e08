"""Helpers for the reliability tests: the real app over a fast deterministic engine (no model)
as a TestClient, any app on uvicorn on a loopback port, and a check that an error answer is
well-formed."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI
from fastapi.testclient import TestClient
from stackroute.bench.fixtures.scripted_engine import ScriptedEngine
from stackroute.server.http.app import create_app
from stackroute.server.settings import ServerSettings

START_TIMEOUT_S = 60.0


def fast_settings(tmp_path: Path, **overrides: Any) -> ServerSettings:
    """Settings for a test app: its own SQLite file; nothing from a config file."""
    return ServerSettings(db=tmp_path / "stackroute.db", **overrides)


@contextmanager
def fast_client(tmp_path: Path, **overrides: Any) -> Iterator[TestClient]:
    """The whole app (auth, limits, error handlers) in-process, routed by `ScriptedEngine`."""
    app = create_app(fast_settings(tmp_path, **overrides), engine=ScriptedEngine(delay_s=0))
    # a loopback Host: the DNS rebinding guard serves no "testserver" (origin_guard.py)
    with TestClient(app, raise_server_exceptions=False, base_url="http://127.0.0.1") as client:
        yield client


def error_of(response: httpx.Response) -> dict[str, Any]:
    """The `error` object of an error answer; fails unless it has a code and a message."""
    body = response.json()
    error = body.get("error") if isinstance(body, dict) else None
    assert isinstance(error, dict), f"{response.status_code} without an error object: {body}"
    assert error.get("code") and error.get("message"), f"error without code/message: {body}"
    return error


@contextmanager
def serve(app: FastAPI) -> Iterator[str]:
    """`app` on uvicorn in a background thread, on a free loopback port; yields its URL."""
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets whose proto says TCP.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False,
                                           ws="none", lifespan="on", log_config=None))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True,
                              name=f"uvicorn-{port}")
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            thread.join(timeout=10)
            sock.close()
            raise RuntimeError("the test server did not start (see the log above)")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
