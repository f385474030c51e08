"""Issue 28.1: what a web page the operator visits can make their browser do to a server on
loopback. Each reproduction is a real server on loopback driven with the headers a browser
sends (a rebinding page's `Host`, a cross-site `Origin`, a `text/plain` "simple" request)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from doubles import PlanEngine
from live_server import serve
from routing_app_kit import make_settings
from session_kit import BANK_CATALOG
from stackroute.server.http.app import create_app
from stackroute.server.settings import ServerSettings
from stackroute.server.telemetry import Telemetry


@pytest.fixture
def server(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    overrides: dict[str, Any] = getattr(request, "param", {})
    app = create_app(make_settings(tmp_path, **overrides), engine=PlanEngine(),
                     telemetry=Telemetry.disabled())
    with serve(app) as base_url:
        yield base_url


def _port(base_url: str) -> int:
    return int(base_url.rsplit(":", 1)[1])


def _catalogs(base_url: str) -> list[Any]:
    listed: list[Any] = httpx.get(f"{base_url}/v1/catalogs").json()["catalogs"]
    return listed


def _error(response: httpx.Response, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code, error
    message: str = error["message"]
    return message


def test_a_rebound_host_reads_nothing_and_starts_nothing(server: str) -> None:
    """The reproduction: with no key, a page whose name was rebound to 127.0.0.1 listed every
    session and started an auto_approve session that paid without a gate."""
    evil = {"Host": f"evil.example:{_port(server)}"}
    catalog_id = httpx.post(f"{server}/v1/catalogs", json=BANK_CATALOG).json()["id"]
    message = _error(httpx.get(f"{server}/v1/sessions", headers=evil), 403, "host_not_allowed")
    assert "'evil.example:" in message and "127.0.0.1" in message and "allowed_hosts" in message
    started = httpx.post(f"{server}/v1/sessions", headers={**evil, "Origin": "http://" + evil[
        "Host"]}, json={"catalog": catalog_id, "task": "Send 5 to Asha", "auto_approve": True})
    _error(started, 403, "host_not_allowed")
    assert httpx.get(f"{server}/v1/sessions").json()["sessions"] == []
    for host in ("127.0.0.1", "localhost", f"localhost:{_port(server)}"):
        assert httpx.get(f"{server}/v1/sessions", headers={"Host": host}).status_code == 200


def test_a_cross_site_text_plain_post_uploads_no_catalog(server: str) -> None:
    """The reproduction: a page's `fetch(url, {method: "POST", body})` (text/plain, no
    preflight) uploaded a catalog: 201."""
    body = json.dumps(BANK_CATALOG)
    no_origin = httpx.post(f"{server}/v1/catalogs?format=json", content=body,
                           headers={"Content-Type": "text/plain;charset=UTF-8"})
    message = _error(no_origin, 415, "unsupported_media_type")
    assert "application/json" in message and "'text/plain;charset=UTF-8'" in message
    cross_site = httpx.post(f"{server}/v1/catalogs", content=body, headers={
        "Content-Type": "application/json", "Origin": "https://evil.example"})
    message = _error(cross_site, 403, "origin_not_allowed")
    assert "'https://evil.example'" in message and "allowed_origins" in message
    for media in ("application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        _error(httpx.post(f"{server}/v1/catalogs", content=body,
                          headers={"Content-Type": media}), 415, "unsupported_media_type")
    assert _catalogs(server) == []


def test_a_bodyless_form_post_is_refused(server: str) -> None:
    """An empty `<form method=post>` sends `Content-Length: 0` with a form type."""
    response = httpx.post(f"{server}/v1/sessions/none/cancel", headers={
        "Content-Type": "application/x-www-form-urlencoded", "Content-Length": "0"})
    _error(response, 415, "unsupported_media_type")


def test_a_null_origin_is_refused(server: str) -> None:
    response = httpx.get(f"{server}/v1/sessions", headers={"Origin": "null"})
    _error(response, 403, "origin_not_allowed")


def test_the_servers_own_origin_and_api_clients_pass(server: str) -> None:
    own = httpx.post(f"{server}/v1/catalogs", json=BANK_CATALOG, headers={"Origin": server})
    assert own.status_code == 201, own.text
    yaml_upload = httpx.post(f"{server}/v1/catalogs", content=json.dumps(BANK_CATALOG),
                             headers={"Content-Type": "application/yaml"})
    assert yaml_upload.status_code == 201, yaml_upload.text
    assert len(_catalogs(server)) == 1
    other_port = server.rsplit(":", 1)[0] + ":1"  # another local web app is another origin
    _error(httpx.get(f"{server}/v1/catalogs", headers={"Origin": other_port}), 403,
           "origin_not_allowed")


@pytest.mark.parametrize("server", [{"allowed_hosts": ["stackroute.internal"],
                                     "allowed_origins": ["https://console.example"]}],
                         indirect=True)
def test_a_reverse_proxy_names_its_host_and_origin(server: str) -> None:
    proxied = {"Host": "stackroute.internal", "Origin": "https://console.example"}
    created = httpx.post(f"{server}/v1/catalogs", json=BANK_CATALOG, headers=proxied)
    assert created.status_code == 201, created.text
    _error(httpx.get(f"{server}/v1/catalogs", headers={"Host": "evil.example"}), 403,
           "host_not_allowed")


@pytest.mark.parametrize("server", [{"host": "0.0.0.0", "api_key": "k"}], indirect=True)
def test_a_server_on_every_interface_serves_any_host_but_still_checks_origins(
        server: str) -> None:
    key = {"Authorization": "Bearer k"}
    assert httpx.get(f"{server}/v1/catalogs", headers={**key, "Host": "10.1.2.3:8000"}
                     ).status_code == 200
    _error(httpx.get(f"{server}/v1/catalogs", headers={**key, "Origin": "https://evil.example"}),
           403, "origin_not_allowed")


def test_the_settings_and_the_cli_flags_reach_the_allowlist(tmp_path: Path) -> None:
    from stackroute.server.cli import app
    from typer.testing import CliRunner

    settings = ServerSettings.load(db=str(tmp_path / "s.db"), allowed_hosts=["a.example"],
                                   allowed_origins=["https://b.example"])
    assert settings.allowed_hosts == ["a.example"]
    assert settings.allowed_origins == ["https://b.example"]
    usage = CliRunner().invoke(app, ["serve", "--help"], terminal_width=200).output
    assert "--allowed-host" in usage and "--allowed-origin" in usage
