"""`/mcp` on `stackroute serve`: the gateway over streamable HTTP (the SDK's session manager),
behind the app's own middleware, so the API key protects it as it does every other route.

`create_app` makes one `McpHttp` per app: its handler table goes to `Services.open` (MCP
leaves forward through the sessions' recorded executor) and `running(services)` holds the
session manager for the app's lifetime.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from stackroute.runtime.handlers import HandlerTable
from stackroute.server.mcp.gateway import McpGateway

if TYPE_CHECKING:
    from stackroute.server.mcp.server_app import Mode
    from stackroute.server.service.services import Services
    from stackroute.server.settings import ServerSettings

log = logging.getLogger(__name__)
MCP_PATH = "/mcp"


class McpHttp:
    def __init__(self, settings: ServerSettings, *, mode: Mode) -> None:
        from stackroute.server.mcp.server_app import build_server  # the SDK, only when on

        self.settings = settings
        self.gateway = McpGateway(timeout_s=settings.leaf_timeout_s)
        self.gateway.register_files(settings.catalogs)
        self.server = build_server(self.gateway, mode=mode)
        starlette_app = self.server.streamable_http_app(streamable_http_path=MCP_PATH,
                                                        host=settings.host)
        # The endpoint alone: it joins the app's routes, under the app's middleware.
        self.routes: list[Any] = [r for r in starlette_app.routes
                                  if getattr(r, "path", None) == MCP_PATH]

    def handlers(self) -> HandlerTable:
        return self.gateway.handlers(self.settings.allowed_handler_modules)

    @asynccontextmanager
    async def running(self, services: Services) -> AsyncIterator[None]:
        """Attach the service (re-importing MCP catalogs from their live servers) and run the
        streamable-HTTP session manager until the app stops."""
        try:
            await anyio.to_thread.run_sync(functools.partial(self.gateway.attach, services))
            async with self.server.session_manager.run():
                log.info("MCP gateway on %s: %s", MCP_PATH,
                         ", ".join(self.gateway.catalog_names()))
                yield
        finally:
            await anyio.to_thread.run_sync(self.gateway.close)


def mcp_endpoint(settings: ServerSettings) -> McpHttp | None:
    """`/mcp` for these settings: None when `mcp_mode` is off or the SDK is not installed."""
    if settings.mcp_mode == "off":
        return None
    if importlib.util.find_spec("mcp") is None:
        log.warning("/mcp is off: the MCP SDK is not installed (pip install 'stackroute[mcp]')")
        return None
    from stackroute.server.mcp.server_app import Mode

    return McpHttp(settings, mode=Mode(settings.mcp_mode))


@asynccontextmanager
async def mcp_running(endpoint: McpHttp | None, services: Services) -> AsyncIterator[None]:
    """`endpoint.running(services)`, or nothing when there is no endpoint."""
    if endpoint is None:
        yield
        return
    async with endpoint.running(services):
        yield
