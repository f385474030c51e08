"""The real app on real uvicorn, on a free loopback port, in a background thread (tier c).

    with serve(create_app(settings, engine=engine)) as base_url:
        httpx.get(f"{base_url}/healthz")
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI
from stackroute.server.settings import ServerSettings

START_TIMEOUT_S = 60.0


def server_settings(tmp_path: Path, **overrides: Any) -> ServerSettings:
    """Settings for a test server: its own SQLite file, nothing read from a config file."""
    return ServerSettings(db=tmp_path / "stackroute.db", **overrides)


@contextmanager
def serve(app: FastAPI) -> Iterator[str]:
    """Run `app` until the block ends; yields its base URL (`http://127.0.0.1:PORT`)."""
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets whose proto says TCP, and
    # without it every response waits ~40 ms on Nagle + delayed ACK.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", access_log=False, ws="none",
                            lifespan="on", log_config=None)
    server = uvicorn.Server(config)
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
