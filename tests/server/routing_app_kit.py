"""A minimal app of the routing API (its routers and `Services`, without the rest of
`create_app`) on real settings, and helpers for its tests."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI
from fastapi.testclient import TestClient
from session_kit import BANK_CATALOG
from stackroute.server.engines.base import Engine
from stackroute.server.http import api_catalogs, api_routing, api_sessions
from stackroute.server.http.app_state import AppState
from stackroute.server.http.errors import install_error_handlers
from stackroute.server.http.metrics import Metrics
from stackroute.server.service.engine_queue import EngineQueue
from stackroute.server.service.services import Services
from stackroute.server.settings import ServerSettings


def make_app(settings: ServerSettings, engine: Engine) -> FastAPI:
    """The routing API's routers and the service, without the rest of `create_app`."""
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state = AppState(settings=settings, engine=engine, metrics=Metrics(),
                         engine_queue=EngineQueue(max_queue=8, max_concurrency=2))
        state.services = Services.open(settings, engine)
        app.state.stackroute = state
        try:
            yield
        finally:
            state.services.close()

    app = FastAPI(lifespan=lifespan)
    install_error_handlers(app)
    for api in (api_routing, api_sessions, api_catalogs):
        app.include_router(api.router)
    return app


def make_settings(tmp_path: Path, **overrides: Any) -> ServerSettings:
    """Real settings; thread isolation and no speculation keep these tests in-process and
    step by step (the scripted engines verify no paths)."""
    values: dict[str, Any] = {"db": tmp_path / "stackroute.db", "catalogs": [],
                              "max_session_steps": 50, "leaf_timeout_s": 5.0,
                              "allowed_handler_modules": [], "max_menu_options": 64,
                              "max_prompt_tokens": 4096, "leaf_isolation": "thread",
                              "speculation": "off", "unwinding": "off"}
    values.update(overrides)
    return ServerSettings(**values)


def upload(client: TestClient, catalog: dict[str, Any] = BANK_CATALOG) -> str:
    r = client.post("/v1/catalogs", json=catalog)
    assert r.status_code == 201, r.text
    catalog_id: str = r.json()["id"]
    return catalog_id


def wait_status(client: httpx.Client, session_id: str, *, timeout_s: float = 10.0,
                poll_s: float = 0.02) -> str:
    """The session's status once it is not running (or as it is after `timeout_s`); any
    httpx client: a TestClient, or one on a live server."""
    deadline = time.monotonic() + timeout_s
    while True:
        status: str = client.get(f"/v1/sessions/{session_id}").json()["status"]
        if status != "running" or time.monotonic() > deadline:
            return status
        time.sleep(poll_s)


def assert_error(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == code and error["message"]
    return error


