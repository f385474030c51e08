"""The FastAPI application: routes and wiring only (the work is in the modules it includes).

`create_app(settings)` builds the engine named by the settings when the app starts (or uses
the one passed in, as tests do), sets up catalogs and sessions, and serves once all of it is
ready: a configured catalog whose constraints do not compile stops the start-up with its
error instead of failing the first request. The app closes the engine it built (a remote
engine's connection pool, vLLM's engine process) at shutdown, or when start-up fails; an
engine passed in stays its caller's to close.
"""

from __future__ import annotations

import functools
import importlib.metadata
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio.to_thread
from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from stackroute.server.engines.base import ClosableEngine, Engine
from stackroute.server.engines.registry import BUILT_IN, create_engine, engine_options
from stackroute.server.http import api_catalogs, api_openai, api_routing, api_sessions
from stackroute.server.http import metrics as metrics_module
from stackroute.server.http.app_state import AppState
from stackroute.server.http.auth import PUBLIC_PATHS, ApiKeyAuth, ApiKeyMiddleware
from stackroute.server.http.console import api_catalog_views, pages
from stackroute.server.http.errors import (
    document_error_responses,
    error_responses,
    install_error_handlers,
)
from stackroute.server.http.metrics import Metrics
from stackroute.server.http.middleware import (
    BodyLimitMiddleware,
    ConnectionLimitMiddleware,
    RequestContextMiddleware,
    TraceContextMiddleware,
    route_template,
)
from stackroute.server.http.origin_guard import HostPolicy, OriginGuardMiddleware
from stackroute.server.http.storable_text import StorableTextMiddleware
from stackroute.server.mcp.http_mount import mcp_endpoint, mcp_running
from stackroute.server.service.engine_queue import EngineQueue
from stackroute.server.service.services import Services
from stackroute.server.settings import ServerSettings
from stackroute.server.telemetry import Telemetry
from stackroute.server.telemetry_spans import SessionTracing
from starlette.types import Scope

log = logging.getLogger(__name__)


class Health(BaseModel):
    status: str = Field(description="'ok' while the process serves requests")


class Readiness(BaseModel):
    status: str = Field(description="'ready' or 'not_ready'")
    checks: dict[str, bool] = Field(description="engine: model loaded; catalogs: compiled")
    engine: dict[str, str] = Field(
        default_factory=dict, description="the engine, its model, and what it chose at start "
        "(prompt_rendering; for a remote engine, the constraints API its upstream offers and "
        "whether it sends logprobs)")


def create_app(settings: ServerSettings, *, engine: Engine | None = None,
               telemetry: Telemetry | None = None) -> FastAPI:
    """The app for these settings; `engine` replaces the one the settings name (tests), and
    `telemetry` the OTLP export the environment asks for (`server/telemetry.py`)."""
    metrics = Metrics()
    traces = telemetry if telemetry is not None else Telemetry.from_environ()
    queue = EngineQueue(max_queue=settings.max_queue, max_concurrency=settings.max_concurrency)
    mcp = mcp_endpoint(settings)  # `/mcp`: the MCP gateway (None: off)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        served = engine if engine is not None else await anyio.to_thread.run_sync(
            functools.partial(build_engine, settings))
        try:
            async with _serving(app, served):
                yield
        finally:
            if engine is None:  # ours: built above
                await _close_engine(served)

    @asynccontextmanager
    async def _serving(app: FastAPI, served: Engine) -> AsyncIterator[None]:
        state = AppState(settings=settings, engine=served, metrics=metrics, engine_queue=queue,
                         tracer=traces.tracer)
        app.state.stackroute = state
        metrics.bind(engine=served, queue=queue)
        tracing = None if traces.tracer is None else SessionTracing(
            traces.tracer, model=served.info.model, system=served.info.engine)
        services = await anyio.to_thread.run_sync(functools.partial(
            Services.open, settings, served, on_routing_call=lambda outcome, usage:
            metrics.observe_routing_call(outcome=outcome, usage=usage),
            # each saved transition becomes spans; a remote engine gets each step's context
            on_saved=None if tracing is None else tracing.on_saved,
            step_traceparent=None if tracing is None else tracing.traceparent,
            handlers=None if mcp is None else mcp.handlers()))
        state.services = services
        metrics.track_sessions(services.sessions.count_by_status,
                               max_age_s=settings.session_gauge_ttl_s)
        state.is_ready = True
        log.info("ready", extra={"engine": served.info.engine, "model": served.info.model,
                                 "host": settings.host, "port": settings.port})
        try:
            async with mcp_running(mcp, services):
                yield
        finally:
            state.is_ready = False
            await anyio.to_thread.run_sync(services.close)
            if tracing is not None:
                tracing.close(time.time())  # paused sessions' spans end here
            if telemetry is None:  # ours: built above
                await anyio.to_thread.run_sync(traces.shutdown)

    # /docs and /redoc load their scripts from a CDN: off unless the operator turns them on
    # (SECURITY.md); /openapi.json is always served.
    docs = {} if settings.serve_docs else {"docs_url": None, "redoc_url": None}
    app = FastAPI(title="stackroute", version=_version(), lifespan=lifespan, **docs,
                  description="Hierarchical tool routing on a local model, with an "
                              "OpenAI-compatible API.",
                  responses=error_responses(500))
    install_error_handlers(app)
    document_error_responses(app)
    auth = [Depends(ApiKeyAuth(settings.api_key))] if settings.api_key is not None else []
    auth_errors = error_responses(401) if auth else {}
    for api in (api_openai, api_routing, api_sessions, api_catalogs):
        app.include_router(api.router, dependencies=auth, responses=auth_errors)
    app.include_router(api_catalog_views.build_router(), dependencies=auth,
                       responses=auth_errors)
    app.include_router(pages.router)  # the console's files: public, they hold no secret
    if mcp is not None:  # behind the middleware below: the API key protects it too
        app.router.routes.extend(mcp.routes)
    if settings.protect_metrics:
        app.include_router(metrics_module.router, dependencies=auth, responses=auth_errors)
    else:
        app.include_router(metrics_module.router)

    @app.get("/healthz", tags=["operations"], summary="The process is up")
    async def healthz() -> Health:
        return Health(status="ok")

    @app.get("/readyz", tags=["operations"], summary="Model loaded and catalogs compiled",
             responses={503: {"model": Readiness, "description": "Not ready yet (or stopping)"}})
    async def readyz(request: Request) -> Any:
        state: AppState | None = getattr(request.app.state, "stackroute", None)
        checks = {"engine": state is not None,
                  "catalogs": state is not None and state.is_ready}
        is_ready = all(checks.values())
        engine = {} if state is None else {"engine": state.engine.info.engine,
                                           "model": state.engine.info.model,
                                           **dict(state.engine.info.features)}
        body = Readiness(status="ready" if is_ready else "not_ready", checks=checks,
                         engine=engine)
        return body if is_ready else JSONResponse(body.model_dump(), status_code=503)

    def on_finish(scope: Scope, status: int, latency_s: float) -> None:
        metrics.observe_request(method=scope["method"], route=route_template(scope),
                                status=status, latency_s=latency_s)

    # Outermost last: request id and log → trace → Host/Origin/content type → connection
    # limit → API key → body limit → unstorable text, so a request without the key is refused
    # before its body is read.
    app.add_middleware(StorableTextMiddleware)  # inside the body limit: gets the whole body
    app.add_middleware(BodyLimitMiddleware, max_body_bytes=settings.max_body_bytes,
                       body_timeout_s=settings.body_timeout_s)
    if settings.api_key is not None:
        public = PUBLIC_PATHS | pages.public_paths()
        public = public if settings.protect_metrics else public | {"/metrics"}
        app.add_middleware(ApiKeyMiddleware, api_key=settings.api_key, public_paths=public)
    app.add_middleware(ConnectionLimitMiddleware, max_connections=settings.max_connections)
    app.add_middleware(OriginGuardMiddleware, policy=HostPolicy.from_settings(
        bind_host=settings.host, allowed_hosts=settings.allowed_hosts,
        allowed_origins=settings.allowed_origins))  # before the key: a rebinding page has none
    app.add_middleware(TraceContextMiddleware, telemetry=traces)
    app.add_middleware(RequestContextMiddleware, on_finish=on_finish)  # outermost
    return app


def build_engine(settings: ServerSettings) -> Engine:
    """The engine the settings name: a registered name, or an import path 'module:factory'
    (called with the same options). The embedded engine also gets its decoding settings."""
    options: dict[str, Any] = {}
    if settings.engine == "transformers":
        options = {"dtype": settings.dtype, "max_draft_tokens": settings.max_draft_tokens,
                   "max_string_chars": settings.max_string_chars}
    if settings.engine in BUILT_IN:  # chat template, vLLM pass-through, remote constraints
        options |= engine_options(settings.engine, chat_template=settings.chat_template,
                                  engine_args=settings.engine_args,
                                  served_model_name=settings.served_model_name,
                                  remote_constraints=settings.remote_constraints)
    return create_engine(settings.engine, model=settings.model, base_url=settings.base_url,
                         **options)


async def _close_engine(engine: Engine) -> None:
    """`engine.close()` where it has one, in a worker thread (vLLM's joins its engine process);
    a failure is logged, not raised, so the rest of the shutdown still runs."""
    if not isinstance(engine, ClosableEngine):
        return
    try:
        await anyio.to_thread.run_sync(engine.close)
    except Exception:
        log.exception("closing the engine failed", extra={"engine": engine.info.engine})
    else:
        log.info("engine closed", extra={"engine": engine.info.engine})


def _version() -> str:
    try:
        return importlib.metadata.version("stackroute")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"
