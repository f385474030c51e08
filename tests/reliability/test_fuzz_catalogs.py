"""Hostile catalogs (hypothesis + a table of named attacks), through
`runtime.catalog.parse_catalog_text` and through `POST /v1/catalogs`: every rejection names the
problem (a 4xx over HTTP), nothing else is ever raised, nothing hangs, memory stays bounded.
The full-size run is `stackroute bench fuzz`."""

from __future__ import annotations

import json
import time
import tracemalloc
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from reliability_kit import error_of, fast_client
from stackroute.bench.reliability.fuzz_cases import (
    ATTACKS,
    MAX_SECONDS,
    alias_bomb,
    as_text,
    check_parse,
    check_upload,
    hostile_catalog_text,
)
from stackroute.runtime.catalog import parse_catalog_text
from stackroute.runtime.errors import CatalogError

NUM_EXAMPLES = 300  # CI size; fuzz_report runs thousands
NUM_HTTP_EXAMPLES = 120


@pytest.mark.parametrize(("document", "fmt", "phrase"), [a[1:] for a in ATTACKS],
                         ids=[a[0] for a in ATTACKS])
def test_each_attack_is_refused_by_name(document: Any, fmt: str, phrase: str) -> None:
    started = time.perf_counter()
    with pytest.raises(CatalogError) as refused:
        parse_catalog_text(as_text(document, fmt), fmt=fmt)
    assert time.perf_counter() - started < MAX_SECONDS
    assert phrase in str(refused.value) or any(phrase in p.message
                                               for p in refused.value.problems), refused.value


@settings(max_examples=NUM_EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(hostile_catalog_text())
def test_hostile_catalogs_load_soundly_or_fail_with_located_problems(
        case: tuple[str, str]) -> None:
    check_parse(*case)


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    with fast_client(tmp_path_factory.mktemp("fuzz-catalogs")) as c:
        yield c


def upload(client: TestClient, text: str, fmt: str) -> Any:
    media = "application/json" if fmt == "json" else "application/yaml"
    return client.post("/v1/catalogs", content=text.encode("utf-8", "surrogatepass"),
                       headers={"content-type": media})


@pytest.mark.parametrize(("document", "fmt", "phrase"), [a[1:] for a in ATTACKS],
                         ids=[a[0] for a in ATTACKS])
def test_each_attack_is_a_4xx_naming_the_problem(client: TestClient, document: Any, fmt: str,
                                                  phrase: str) -> None:
    r = upload(client, as_text(document, fmt), fmt)
    if "\x00" in as_text(document, fmt) or "\\u0000" in as_text(document, fmt):
        # no store can keep a NUL: the HTTP edge refuses it (400) before the catalog's checks
        assert r.status_code == 400 and error_of(r)["code"] == "unstorable_text", r.text[:500]
        assert "U+0000 (NUL)" in error_of(r)["message"]
        return
    assert r.status_code == 422, r.text[:500]
    error = error_of(r)
    found = error["message"] + " ".join(p["message"] for p in error.get("problems", []))
    assert phrase in found, error


def test_hostile_catalogs_over_http_agree_with_the_runtime(client: TestClient) -> None:
    num_cases = 0

    @settings(max_examples=NUM_HTTP_EXAMPLES, deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(hostile_catalog_text())
    def check(case: tuple[str, str]) -> None:
        nonlocal num_cases
        num_cases += 1
        check_upload(client, *case)

    check()
    assert num_cases >= NUM_HTTP_EXAMPLES // 2


@pytest.mark.parametrize("where", ["metadata", "parameters", "children", "description"])
def test_alias_bombs_cost_little_memory_and_time(where: str) -> None:
    text = alias_bomb(where)
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(CatalogError):
            parse_catalog_text(text, fmt="yaml")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - started < 5.0
    assert peak < 32 << 20, f"{peak >> 20} MiB"  # the expansion would be 9**9 items


def test_a_body_at_the_size_limit_is_bounded(client: TestClient) -> None:
    """An 8 MiB catalog of long descriptions is refused by name; over the limit is 413; the
    process holds a few copies of the body at most."""
    big = json.dumps({"name": "bank", "children": [
        {"name": f"t{i}", "description": "d" * 30_000} for i in range(270)]})
    assert len(big) < 8 << 20
    tracemalloc.start()
    try:
        r = upload(client, big, "json")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert r.status_code == 422 and "more than the limit 20000" in r.text
    assert peak < 200 << 20, f"{peak >> 20} MiB for an 8 MiB body"
    over = client.post("/v1/catalogs", content=b"x" * ((8 << 20) + 1),
                       headers={"content-type": "application/json"})
    assert over.status_code == 413 and error_of(over)["code"] == "request_too_large"
