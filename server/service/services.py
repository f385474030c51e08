"""The service's parts built together at start-up and closed together at shutdown: the store,
the catalogs, the per-catalog routers and the sessions, with the options every routing
call and session shares."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from stackroute.runtime.handlers import HandlerTable
from stackroute.server.engines.base import Engine
from stackroute.server.routing.pool import RouterPool
from stackroute.server.routing.prefix_warming import PrefixWarmer
from stackroute.server.service.catalog_registry import CatalogRegistry
from stackroute.server.service.prompt_limits import PromptLimits
from stackroute.server.service.route_call import RouteContext
from stackroute.server.service.session_options import SessionOptions
from stackroute.server.service.session_worker import (
    RoutingObserver,
    SavedObserver,
    StepTraceparent,
)
from stackroute.server.service.sessions import SessionService
from stackroute.server.service.store_protocol import StoreBackend
from stackroute.server.service.store_url import open_store
from stackroute.server.settings import ServerSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class Services:
    store: StoreBackend
    catalogs: CatalogRegistry
    sessions: SessionService
    route_context: RouteContext  # what every `/v1/route` call shares

    @classmethod
    def open(cls, settings: ServerSettings, engine: Engine, *,
             on_routing_call: RoutingObserver | None = None,
             on_saved: SavedObserver | None = None,
             step_traceparent: StepTraceparent | None = None,
             handlers: HandlerTable | None = None) -> Services:
        """Open the store (settings.db), load the stored catalogs and settings.catalogs, and
        resume the sessions a stopped process left running. `handlers`: the sessions' handler
        table (the MCP gateway's adds its `mcp` kind); default: settings' allowed modules.
        The observers (metrics, telemetry) are the sessions' from the start, so sessions
        resumed here report too."""
        router_options = settings.router_options(engine.info.model)
        store = open_store(settings.db, lease_s=settings.session_lease_s)
        try:
            routers = RouterPool(engine, router_options)
            catalogs = CatalogRegistry(store, engine, allowed_handler_modules=tuple(
                settings.allowed_handler_modules),
                on_compiled=PrefixWarmer(routers, scope=settings.warm_on_load).prepare)
            failed = catalogs.load_persisted()
            if failed:
                log.warning("%d stored catalog(s) did not load: %s", len(failed),
                            ", ".join(failed))
            for path in settings.catalogs:
                entry = catalogs.add_file(path)
                log.info("catalog %s from %s", entry.id, path)
            sessions = SessionService(store, catalogs, engine,
                                      options=SessionOptions.from_settings(settings),
                                      on_routing_call=on_routing_call, on_saved=on_saved,
                                      step_traceparent=step_traceparent,
                                      routers=routers, handlers=handlers)
        except BaseException:
            store.close()
            raise
        services = cls(store=store, catalogs=catalogs, sessions=sessions,
                       route_context=RouteContext(
                           engine=engine, limits=PromptLimits.from_settings(settings),
                           routers=routers))
        resumed = sessions.resume_interrupted()
        if resumed:
            log.info("resumed %d interrupted session(s)", len(resumed))
        sessions.start_lease_keeper()
        return services

    def close(self) -> None:
        """Stop the session workers (after their current transition) and close the store."""
        self.sessions.close()
        self.store.close()
