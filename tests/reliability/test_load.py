"""Load, CI size: routing and session clients against the real app on uvicorn (loopback) with
the embedded model, for a few seconds, behind a one-slot engine queue. Every request is
answered or refused with a clean 429; no accepted session is lost; the prefix cache stays under
its byte cap. The full size is `stackroute bench load` (`stackroute serve` as a child process,
60 s)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from reliability_kit import fast_settings, serve
from stackroute.bench.reliability.load_test import EXAMPLES, LoadOptions, load_queries, run_load
from stackroute.server.http.app import create_app

CACHE_CAP_BYTES = 4 << 20  # small: a few routing prompts fill it, so eviction is exercised


@pytest.mark.model
def test_a_short_load_is_answered_cleanly_and_loses_nothing(
        tmp_path: Path, embedded_model: Any) -> None:
    import httpx
    from stackroute.server.engines.transformers_engine import TransformersEngine

    engine = TransformersEngine(loaded=embedded_model, cache_bytes=CACHE_CAP_BYTES)
    settings = fast_settings(tmp_path, max_queue=1, max_concurrency=1,
                             catalogs=[EXAMPLES / "bank.catalog.json"])
    with serve(create_app(settings, engine=engine)) as base_url:
        catalog_id = httpx.get(f"{base_url}/v1/catalogs").json()["catalogs"][0]["id"]
        queries = load_queries(EXAMPLES / "bank.queries.jsonl")
        warm = httpx.post(f"{base_url}/v1/route", json={"catalog": catalog_id,
                                                        "query": queries[0]}, timeout=120)
        assert warm.status_code == 200
        report = run_load(base_url, catalog_id=catalog_id, queries=queries,
                          options=LoadOptions(duration_s=8.0, num_route_clients=4,
                                              num_session_clients=1, sample_s=0.25),
                          cache_cap_bytes=CACHE_CAP_BYTES)
    assert report.is_ok, report.summary()
    assert report.route_ok >= 1 and report.rejected_429 >= 1, report.summary()
    assert report.sessions_lost == 0 and report.sessions_accepted >= 1, report.summary()
    assert report.queue_depth_max <= 1
    assert report.cache_mb_max * 2**20 <= CACHE_CAP_BYTES
