"""Issue 28.8, the lower findings, each on a real server on loopback: bidi and other hidden
characters in a gate's arguments are shown escaped (API and console); `/docs` and `/redoc`
(CDN scripts outside the console's CSP) are off by default; the open `/metrics` names the
model without its path and counts sessions on the store at most once per
`session_gauge_ttl_s`."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from doubles import PlanEngine
from live_server import serve
from routing_app_kit import make_settings
from session_kit import BANK_CATALOG
from stackroute.server.engines.base import EngineInfo
from stackroute.server.http.app import create_app
from stackroute.server.http.metrics import Metrics
from stackroute.server.telemetry import Telemetry

STATIC = Path(__file__).resolve().parents[3] / "server" / "http" / "console" / "static"
# "Asha" then a right-to-left override: a browser shows the digits after it reversed.
PAYEE = "Asha\u202e0001\u202c\u200b"


def _app(tmp_path: Path, engine: Any = None, **overrides: Any) -> Any:
    return create_app(make_settings(tmp_path, **overrides), engine=engine or PlanEngine(),
                      telemetry=Telemetry.disabled())


def test_a_gates_hidden_characters_are_shown_escaped(tmp_path: Path) -> None:
    engine = PlanEngine(arguments={"send_money": {"payee": PAYEE, "amount": 5}})
    with serve(_app(tmp_path, engine)) as base:
        catalog_id = httpx.post(f"{base}/v1/catalogs", json=BANK_CATALOG).json()["id"]
        session_id = httpx.post(f"{base}/v1/sessions", json={
            "catalog": catalog_id, "task": f"Send 5 to {PAYEE}"}).json()["id"]
        deadline = time.monotonic() + 30
        while (view := httpx.get(f"{base}/v1/sessions/{session_id}").json())["status"] \
                == "running" and time.monotonic() < deadline:
            time.sleep(0.02)
    pending = view["pending"]
    assert view["status"] == "paused" and pending["is_gated"], (view["calls"], view["error"])
    assert pending["arguments"]["payee"] == PAYEE  # the call itself is unchanged
    shown = pending["arguments_text"]
    assert '"payee": "Asha\\u202e0001\\u202c\\u200b"' in shown, shown
    assert not any(ch in shown for ch in "\u202e\u202c\u200b")
    assert json.loads(shown.replace("\\u202e", "").replace("\\u202c", "").replace(
        "\\u200b", "")) == {"payee": "Asha0001", "amount": 5}


def test_the_console_shows_the_servers_escaped_text_and_escapes_its_own_json() -> None:
    page = (STATIC / "session_page.js").read_text()
    assert 'class: "gate-arguments" }, pending.arguments_text' in page
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the console's escaping is checked in the "
                    "browser test only")
    script = ("import {json, shortJson} from './dom.js';"
              "console.log(JSON.stringify([json({p: process.argv[1]}), "
              "shortJson({p: process.argv[1]})]));")
    out = subprocess.run([node, "--input-type=module", "-e", script, PAYEE], cwd=STATIC,
                         capture_output=True, text=True, timeout=30, check=True).stdout
    pretty, short = json.loads(out)
    assert pretty == '{\n  "p": "Asha\\u202e0001\\u202c\\u200b"\n}'
    assert short == '{"p":"Asha\\u202e0001\\u202c\\u200b"}'


def test_docs_are_off_by_default_and_the_schema_stays(tmp_path: Path) -> None:
    with serve(_app(tmp_path)) as base:
        assert httpx.get(f"{base}/docs").status_code == 404
        assert httpx.get(f"{base}/redoc").status_code == 404
        assert httpx.get(f"{base}/openapi.json").json()["info"]["title"] == "stackroute"
    with serve(_app(tmp_path, serve_docs=True)) as base:
        assert httpx.get(f"{base}/docs").status_code == 200


class PathEngine(PlanEngine):
    """An engine built from a path that names its model by it (a custom factory may)."""

    def __init__(self) -> None:
        super().__init__()
        self.info = EngineInfo(engine="plan", model="/srv/models/acme-secret/model-7b",
                               max_context_tokens=1 << 20)


@pytest.fixture
def metrics_server(tmp_path: Path) -> Iterator[str]:
    with serve(_app(tmp_path, PathEngine(), session_gauge_ttl_s=3600)) as base:
        yield base


def test_open_metrics_name_the_model_without_its_path(metrics_server: str) -> None:
    text = httpx.get(f"{metrics_server}/metrics").text
    assert 'model="model-7b"' in text
    assert "/srv/models" not in text and "acme-secret" not in text


def test_open_metrics_count_sessions_once_per_ttl(metrics_server: str) -> None:
    catalog_id = httpx.post(f"{metrics_server}/v1/catalogs", json=BANK_CATALOG).json()["id"]
    first = httpx.get(f"{metrics_server}/metrics").text
    httpx.post(f"{metrics_server}/v1/sessions", json={"catalog": catalog_id, "task": "Send 5"})
    for _ in range(5):
        assert httpx.get(f"{metrics_server}/metrics").text.count("stackroute_sessions{") == \
            first.count("stackroute_sessions{")  # the cached counts: no new status yet


def test_the_session_counts_are_cached_for_their_max_age() -> None:
    calls: list[float] = []

    def count() -> dict[str, int]:
        calls.append(time.monotonic())
        return {"running": len(calls)}

    metrics = Metrics()
    metrics.track_sessions(count, max_age_s=0.3)
    for _ in range(20):
        metrics.exposition()
    assert len(calls) == 1
    time.sleep(0.35)
    assert b'stackroute_sessions{status="running"} 2.0' in metrics.exposition()
    uncached = Metrics()
    uncached.track_sessions(count, max_age_s=0.0)
    uncached.exposition()
    uncached.exposition()
    assert len(calls) == 4
