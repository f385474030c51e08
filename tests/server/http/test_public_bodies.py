"""Issue 28.3: with a key set, a client without it cannot make the server buffer a body.

The reproduction, on a real server on loopback: two slow 8 MiB POSTs to open paths
(`/healthz`, `/metrics`, `/ui/static/*`) passed the key check, then the body limit read them
for `body_timeout_s`, holding both of `max_connections=2` slots: keyed requests got 503."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from doubles import PlanEngine
from live_server import serve
from routing_app_kit import make_settings
from stackroute.server.http.app import create_app
from stackroute.server.telemetry import Telemetry

EIGHT_MIB = 8 << 20
KEY = {"Authorization": "Bearer k"}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    settings = make_settings(tmp_path, api_key="k", max_connections=2, body_timeout_s=30.0)
    with serve(create_app(settings, engine=PlanEngine(), telemetry=Telemetry.disabled())) as url:
        yield url


def _slow_post(base_url: str, path: str, *, chunked: bool = False) -> socket.socket:
    """Headers of an 8 MiB upload and its first 1 KiB; the rest never comes."""
    host, port = base_url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    length = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {EIGHT_MIB}"
    sock.sendall(f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                 f"{length}\r\n\r\n".encode() + (b"400\r\n" if chunked else b"") + b"x" * 1024)
    return sock


def _answer(sock: socket.socket) -> str:
    sock.settimeout(5)
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    except TimeoutError:
        return "<no answer within 5 s>"
    return data.decode("latin-1")


@pytest.mark.parametrize("path", ["/healthz", "/metrics", "/ui/static/app.js", "/readyz"])
def test_an_open_path_refuses_a_body_before_reading_it(server: str, path: str) -> None:
    sock = _slow_post(server, path)
    try:
        started = time.monotonic()
        answer = _answer(sock)
        assert answer.startswith("HTTP/1.1 413"), answer[:300]
        assert "body_not_allowed" in answer + _answer(sock) or "413" in answer
        assert time.monotonic() - started < 5
    finally:
        sock.close()


def test_slow_unauthenticated_uploads_hold_no_connection_slot(server: str) -> None:
    slow = [_slow_post(server, "/healthz"), _slow_post(server, "/metrics", chunked=True)]
    try:
        time.sleep(0.3)  # both uploads are in: before the fix they held both slots
        response = httpx.get(f"{server}/v1/catalogs", headers=KEY, timeout=10)
        assert response.status_code == 200, response.text
        assert httpx.get(f"{server}/healthz", timeout=10).status_code == 200
    finally:
        for sock in slow:
            sock.close()


def test_open_paths_still_answer_without_a_body(server: str) -> None:
    assert httpx.get(f"{server}/healthz").json() == {"status": "ok"}
    assert httpx.get(f"{server}/metrics").status_code == 200
    assert httpx.post(f"{server}/healthz").status_code == 405  # no body: the route answers
