"""The app's lifespan closes the engine it built (a remote engine's connection pool, vLLM's
engine process), at shutdown and when start-up fails; an engine passed in stays the caller's.
Tier c: the real app on real uvicorn, on loopback."""

from __future__ import annotations

import logging
from pathlib import Path

import anyio
import doubles
import httpx
import pytest
from doubles import RecordingEngine
from live_server import serve, server_settings
from stackroute.runtime.errors import CatalogError
from stackroute.server.engines.remote_engine import RemoteEngine
from stackroute.server.http.app import create_app
from upstream_kit import OK, Script, fake_server

BY_IMPORT_PATH = "doubles:build_recording_engine"


@pytest.fixture(autouse=True)
def no_engines_built() -> None:
    doubles.BUILT.clear()


def test_the_engine_the_app_built_is_closed_once_at_shutdown(tmp_path: Path) -> None:
    app = create_app(server_settings(tmp_path, engine=BY_IMPORT_PATH))
    with serve(app) as base_url:
        assert httpx.get(f"{base_url}/readyz").status_code == 200
        (engine,) = doubles.BUILT
        assert app.state.stackroute.engine is engine and engine.num_closes == 0
    assert engine.num_closes == 1


def test_a_remote_engine_built_from_settings_closes_its_pool(tmp_path: Path) -> None:
    with serve(fake_server(Script(OK))) as upstream:
        app = create_app(server_settings(tmp_path, engine="remote", base_url=upstream))
        with serve(app) as base_url:
            assert httpx.get(f"{base_url}/v1/models").json()["data"][0]["id"] == "fake"
            remote = app.state.stackroute.engine
            assert isinstance(remote, RemoteEngine) and not remote.is_closed
        assert remote.is_closed


def test_a_failed_start_still_closes_the_engine(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    app = create_app(server_settings(tmp_path, engine=BY_IMPORT_PATH, catalogs=[broken]))

    async def start() -> None:  # the lifespan alone: uvicorn would exit the process here
        async with app.router.lifespan_context(app):
            raise AssertionError("the app started with a broken catalog")

    with pytest.raises(CatalogError, match="not valid JSON"):
        anyio.run(start)
    (engine,) = doubles.BUILT
    assert engine.num_closes == 1


def test_an_engine_passed_in_stays_open(tmp_path: Path) -> None:
    engine = RecordingEngine()
    with serve(create_app(server_settings(tmp_path), engine=engine)):
        pass
    assert engine.num_closes == 0


def test_an_engine_that_fails_to_close_is_logged(tmp_path: Path,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    app = create_app(server_settings(tmp_path, engine=BY_IMPORT_PATH))
    with caplog.at_level(logging.ERROR, logger="stackroute.server.http.app"), serve(app):
        doubles.BUILT[0].close_error = OSError("pool already gone")
    assert doubles.BUILT[0].num_closes == 1
    assert any("closing the engine failed" in r.getMessage() for r in caplog.records)
