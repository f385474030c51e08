"""What the HTTP layer shares across requests: settings, the engine, catalogs, sessions,
metrics. Built once at start-up by `server/http/app.py`; routers reach it through `get_state`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fastapi import Request
from stackroute.server.engines.base import Engine


@dataclass
class AppState:
    settings: Any  # server.settings.ServerSettings
    engine: Engine
    catalogs: Any = None  # server.catalog_registry.CatalogRegistry
    sessions: Any = None  # server.sessions.SessionService
    metrics: Any = None  # server.metrics.Metrics
    engine_queue: Any = None  # server.engine_queue.EngineQueue: every engine call goes through it
    is_ready: bool = False  # set once start-up finished (catalogs compiled); false at shutdown
    extras: dict[str, Any] = field(default_factory=dict)


def get_state(request: Request) -> AppState:
    state: AppState = request.app.state.stackroute
    return state
