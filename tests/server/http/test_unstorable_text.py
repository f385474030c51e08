"""Issue 28.7 (the HTTP edge): a NUL character in a request was an unhandled 500 on
PostgreSQL (its `text` and `jsonb` cannot hold U+0000). Now any text no store can keep (NUL,
an unpaired surrogate) is a 400 that says what was expected and what arrived, and where, on
either store, before a route runs. Real server on loopback; PostgreSQL from tests/pg_fixture."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from doubles import PlanEngine
from live_server import serve
from routing_app_kit import make_settings
from session_kit import BANK_CATALOG
from stackroute.server.http.app import create_app
from stackroute.server.telemetry import Telemetry

JSON = {"Content-Type": "application/json"}


@pytest.fixture(params=["sqlite", "postgresql"])
def server(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    db = request.getfixturevalue("pg_url") if request.param == "postgresql" \
        else str(tmp_path / "s.db")
    settings = make_settings(tmp_path, db=db)
    with serve(create_app(settings, engine=PlanEngine(), telemetry=Telemetry.disabled())) as url:
        yield url


def _refused(response: httpx.Response, where: str, what: str) -> dict[str, str]:
    assert response.status_code == 400, response.text
    error: dict[str, str] = response.json()["error"]
    assert error["code"] == "unstorable_text", error
    assert error["message"].startswith("expected text without U+0000 (NUL)"), error
    assert f"got {what} in {where}" in error["message"], error
    return error


def test_a_nul_in_a_task_is_a_400_naming_the_field(server: str) -> None:
    """The reproduction: `{"task": "pay\\u0000"}` on PostgreSQL was a 500."""
    catalog_id = httpx.post(f"{server}/v1/catalogs", json=BANK_CATALOG).json()["id"]
    body = json.dumps({"catalog": catalog_id, "task": "Send 5 to Asha\x00"})
    assert "\\u0000" in body  # the escape a JSON client sends
    error = _refused(httpx.post(f"{server}/v1/sessions", content=body, headers=JSON),
                     "body field 'task'", "U+0000 (NUL)")
    assert error["param"] == "task"
    assert httpx.get(f"{server}/v1/sessions").json()["sessions"] == []


def test_an_unpaired_surrogate_in_a_catalog_is_refused(server: str) -> None:
    body = ('{"name": "bank", "description": "Banking", "children": [{"name": "pay", '
            '"description": "Pay \\ud800 someone"}]}')
    _refused(httpx.post(f"{server}/v1/catalogs", content=body, headers=JSON),
             "body field 'children.0.description'", "U+D800 (an unpaired surrogate)")
    assert httpx.get(f"{server}/v1/catalogs").json()["catalogs"] == []


def test_a_nul_in_the_path_or_query_is_refused(server: str) -> None:
    _refused(httpx.get(f"{server}/v1/sessions/abc%00def"), "the path", "U+0000 (NUL)")
    _refused(httpx.get(f"{server}/v1/sessions?status=%00"), "the query string",
             "U+0000 (NUL)")


def test_text_that_only_looks_like_an_escape_is_kept(server: str) -> None:
    """A literal backslash-u0000 (an escaped backslash) is ordinary text."""
    catalog_id = httpx.post(f"{server}/v1/catalogs", json=BANK_CATALOG).json()["id"]
    started = httpx.post(f"{server}/v1/sessions", json={
        "catalog": catalog_id, "task": "Send 5 to Asha \\u0000 and \U0001F44B"})
    assert started.status_code == 201, started.text
    assert "\\u0000" in httpx.get(f"{server}/v1/sessions/{started.json()['id']}"
                                  ).json()["task"]
