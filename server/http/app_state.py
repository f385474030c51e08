"""What the HTTP layer shares across requests: settings, the engine, its queue, metrics, and
the service (catalogs and sessions). Built once at start-up by `server/http/app.py`; routers
reach it through `get_state`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fastapi import Request
from stackroute.runtime.errors import StackrouteError
from stackroute.server.engines.base import Engine
from stackroute.server.service.engine_queue import EngineQueue
from stackroute.server.service.services import Services
from stackroute.server.settings import ServerSettings

if TYPE_CHECKING:  # metrics.py reads the state through get_state below
    from stackroute.server.http.metrics import Metrics


class NotReadyError(StackrouteError):
    """A route that needs the service ran before start-up finished (our bug: routes are
    served only after the lifespan set it up)."""


@dataclass
class AppState:
    settings: ServerSettings
    engine: Engine
    engine_queue: EngineQueue  # every engine call of a request goes through it
    metrics: Metrics
    services: Services | None = None  # set once catalogs and sessions are loaded
    is_ready: bool = False  # set once start-up finished (catalogs compiled); false at shutdown
    tracer: Any | None = None  # OpenTelemetry's, when export is on (server/telemetry.py)

    def service(self) -> Services:
        if self.services is None:
            raise NotReadyError("the service is not set up (start-up has not finished)")
        return self.services


def get_state(request: Request) -> AppState:
    state: AppState = request.app.state.stackroute
    return state
