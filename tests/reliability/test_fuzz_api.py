"""Hostile requests to every endpoint of the real app on uvicorn (loopback), routed by a fast
scripted engine: schemathesis over the OpenAPI schema (positive and negative data) and our own
strategies (mutated run states, broken bodies, hostile headers and path segments). Every
answer is a success or a 4xx in the one error shape, in time; the server stays up. The
full-size run is `stackroute bench fuzz`."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest
from reliability_kit import error_of, fast_settings, serve
from stackroute.bench.fixtures.scripted_engine import ScriptedEngine
from stackroute.bench.reliability.fuzz_api import (
    SEED_CATALOG,
    FuzzStats,
    Known,
    run_hostile_requests,
    run_schemathesis,
    seed_server,
)
from stackroute.server.http.app import create_app

NUM_SCHEMATHESIS_EXAMPLES = 6  # per operation, data mode and path-parameter choice
NUM_HOSTILE_EXAMPLES = 300


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Known]]:
    settings = fast_settings(tmp_path_factory.mktemp("fuzz-api"), max_queue=8)
    with serve(create_app(settings, engine=ScriptedEngine(delay_s=0))) as base_url:
        yield base_url, seed_server(base_url)


def test_schemathesis_finds_no_server_error_and_no_schema_violation(
        server: tuple[str, Known]) -> None:
    base_url, known = server
    stats = FuzzStats()
    run_schemathesis(base_url, known, max_examples=NUM_SCHEMATHESIS_EXAMPLES, stats=stats)
    assert stats.failures == []
    assert stats.total >= 200, stats.num_cases
    assert not [s for s in stats.statuses if s >= 500]


def test_hostile_requests_get_answers_in_the_error_shape(server: tuple[str, Known]) -> None:
    base_url, known = server
    stats = FuzzStats()
    run_hostile_requests(base_url, known, max_examples=NUM_HOSTILE_EXAMPLES, stats=stats)
    assert stats.failures == []
    assert stats.total >= NUM_HOSTILE_EXAMPLES // 2
    assert stats.slowest_s < 10


@pytest.mark.parametrize(("path", "headers", "status", "phrase"), [
    # Numbers past SQLite's INTEGER once reached the database and answered 500.
    ("/v1/sessions?offset=100000000000000000000", {}, 422, "offset"),
    ("/v1/sessions/{sid}/events?after=100000000000000000000", {}, 422, "after"),
    ("/v1/sessions/{sid}/events", {"last-event-id": "100000000000000000000"}, 400,
     "Last-Event-ID"),
    ("/v1/sessions/{sid}/events", {"last-event-id": "9" * 5000}, 400, "Last-Event-ID"),
])
def test_out_of_range_numbers_are_4xx(server: tuple[str, Known], path: str,
                                      headers: dict[str, str], status: int,
                                      phrase: str) -> None:
    base_url, known = server
    r = httpx.get(base_url + path.format(sid=known.session_ids[0]), headers=headers,
                  timeout=10)
    assert r.status_code == status, r.text
    assert phrase in error_of(r)["message"]


def test_an_error_quoting_a_lone_surrogate_is_still_a_4xx(server: tuple[str, Known]) -> None:
    """JSON may escape a lone surrogate; a message quoting it once failed to encode (500)."""
    base_url, _ = server
    body = '{"name": "r", "children": [{"name": "\\ud800", "children": []}]}'
    r = httpx.post(f"{base_url}/v1/catalogs", content=body,
                   headers={"content-type": "application/json"}, timeout=10)
    assert r.status_code == 400  # refused at the edge: no store can keep it (issue 28.7)
    assert "U+D800 (an unpaired surrogate) in body field 'children.0.name'" in \
        error_of(r)["message"]


def test_the_server_is_healthy_and_fast_after_the_fuzzing(server: tuple[str, Known]) -> None:
    base_url, _ = server
    # The fuzzing may have deleted the seeded catalog (DELETE is an operation too).
    catalog_id = httpx.post(f"{base_url}/v1/catalogs", json=SEED_CATALOG,
                            timeout=10).json()["id"]
    started = time.perf_counter()
    r = httpx.post(f"{base_url}/v1/route", json={"catalog": catalog_id,
                                                 "query": "job=Z amount=1 plan: help"},
                   timeout=10)
    assert r.status_code == 200 and r.json()["decision"] == "help"
    assert time.perf_counter() - started < 2
    assert httpx.get(f"{base_url}/readyz", timeout=10).status_code == 200
