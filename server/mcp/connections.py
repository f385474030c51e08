"""MCP client sessions (the official SDK's `ClientSession` over `stdio_client` or
`streamable_http_client`): one-shot `fetch_tools` for an import, and `McpConnections`, the
gateway's live sessions on one private event loop, callable from any thread.

A session that drops is reopened before the *next* call, never to repeat one: a call that may
have reached its server is reported as failed, not sent again (the leaf executor's
exactly-once record relies on that).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from stackroute.runtime.errors import StackrouteError
from stackroute.server.engines.loop_thread import LoopThread
from stackroute.server.mcp.config import McpServerConfig, Transport

log = logging.getLogger(__name__)

DEFAULT_CALL_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 60.0  # a stdio server's process start and handshake


class McpUnavailableError(StackrouteError):
    """The MCP server could not be reached, or answered with a protocol error."""


class McpTimeoutError(StackrouteError):
    """The MCP server did not answer a tool call in time (it may still act on it)."""


@dataclass(frozen=True)
class ToolAnswer:
    """A `tools/call` result: structured content when the tool gave some, else its text
    (parsed as JSON where it is JSON); `is_error` when the tool reported failure."""

    result: Any
    text: str
    is_error: bool


@asynccontextmanager
async def open_session(config: McpServerConfig, *,
                       on_tools_changed: Callable[[], None] | None = None,
                       ) -> AsyncIterator[Any]:
    """An initialized `ClientSession` to one server, closed (its process stopped) on exit."""
    from mcp import ClientSession, StdioServerParameters, stdio_client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client
    from mcp.types import ToolListChangedNotification

    async def on_message(message: Any) -> None:
        if isinstance(message, ToolListChangedNotification) and on_tools_changed is not None:
            on_tools_changed()
        elif isinstance(message, Exception):
            log.warning("MCP server %s: %s", config.name, message)

    if config.transport is Transport.STDIO:
        params = StdioServerParameters(command=config.command, args=list(config.args),
                                       env=dict(config.env) or None, cwd=config.cwd)
        async with stdio_client(params, errlog=sys.stderr) as (read, write), \
                ClientSession(read, write, message_handler=on_message) as session:
            await session.initialize()
            yield session
        return
    async with create_mcp_http_client(headers=dict(config.headers)) as http, \
            streamable_http_client(config.url, http_client=http) as (read, write), \
            ClientSession(read, write, message_handler=on_message) as session:
        await session.initialize()
        yield session


def tool_dicts(listed: Any) -> list[dict[str, Any]]:
    """`tools/list` tools as the protocol's JSON (camelCase keys), for `from_mcp_tools`."""
    return [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in listed.tools]


async def list_all_tools(session: Any) -> list[dict[str, Any]]:
    """Every page of `tools/list`."""
    from mcp.types import PaginatedRequestParams

    tools: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        listed = await session.list_tools(
            params=None if cursor is None else PaginatedRequestParams(cursor=cursor))
        tools.extend(tool_dicts(listed))
        cursor = listed.next_cursor
        if not cursor:
            return tools


async def fetch_tools(config: McpServerConfig) -> list[dict[str, Any]]:
    """One server's `tools/list`, over a session opened and closed for it."""
    try:
        async with asyncio.timeout(CONNECT_TIMEOUT_S):
            async with open_session(config) as session:
                return await list_all_tools(session)
    except (StackrouteError, TimeoutError):
        raise
    except Exception as e:
        raise McpUnavailableError(f"MCP server {config.name!r}: {type(e).__name__}: "
                                  f"{e}") from e


class McpConnections:
    """Live sessions to the gateway's MCP servers, by name, on a private loop thread.

    `on_tools_changed(name)` runs (on the loop thread) when a server sends
    `notifications/tools/list_changed`."""

    def __init__(self, *, default_timeout_s: float = DEFAULT_CALL_TIMEOUT_S,
                 on_tools_changed: Callable[[str], None] | None = None) -> None:
        self.default_timeout_s = default_timeout_s
        self.on_tools_changed = on_tools_changed
        self._loop = LoopThread(name="mcp-client")
        self._configs: dict[str, McpServerConfig] = {}
        self._sessions: dict[str, Any] = {}
        self._stops: dict[str, asyncio.Event] = {}
        self._lock = threading.Lock()

    @property
    def names(self) -> list[str]:
        with self._lock:
            return list(self._configs)

    def config(self, name: str) -> McpServerConfig | None:
        with self._lock:
            return self._configs.get(name)

    def add(self, config: McpServerConfig) -> None:
        """Know `config` (connect on first use); the same name with another config is an
        error, as two catalogs naming one server two ways cannot both be right."""
        with self._lock:
            known = self._configs.get(config.name)
            if known is not None and known != config:
                raise McpUnavailableError(f"MCP server {config.name!r} is already configured "
                                          f"differently ({known.to_dict()})")
            self._configs[config.name] = config

    def list_tools(self, name: str) -> list[dict[str, Any]]:
        return self._loop.call(self._list_tools(name), timeout_s=CONNECT_TIMEOUT_S + 5)

    def call_tool(self, name: str, tool: str, arguments: dict[str, Any], *,
                  timeout_s: float | None = None) -> ToolAnswer:
        """Call `tool` on server `name`; `McpTimeoutError` past the timeout (the server's
        `timeout_s`, else the default), `McpUnavailableError` for a protocol error."""
        config = self.config(name)
        if config is None:
            raise McpUnavailableError(f"no MCP server {name!r} is configured (known: "
                                      f"{', '.join(self.names) or 'none'})")
        limit = config.timeout_s or self.default_timeout_s
        if timeout_s is not None:  # the caller's ceiling (the leaf executor's limit)
            limit = min(limit, timeout_s)
        return self._loop.call(self._call(config, tool, arguments, limit),
                               timeout_s=limit + CONNECT_TIMEOUT_S + 5)

    def close(self) -> None:
        try:
            self._loop.call(self._close_all(), timeout_s=15)
        except Exception:  # a server that will not stop must not block shutdown
            log.warning("MCP sessions did not close cleanly", exc_info=True)
        self._loop.stop()
        self._loop.close()

    # -- on the loop --------------------------------------------------------------------------
    async def _session(self, config: McpServerConfig) -> Any:
        session = self._sessions.get(config.name)
        if session is not None:
            return session
        ready: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        stop = asyncio.Event()
        self._stops[config.name] = stop
        asyncio.get_running_loop().create_task(self._hold(config, ready, stop))
        async with asyncio.timeout(CONNECT_TIMEOUT_S):
            return await ready

    async def _hold(self, config: McpServerConfig, ready: asyncio.Future[Any],
                    stop: asyncio.Event) -> None:
        def changed() -> None:
            if self.on_tools_changed is not None:
                self.on_tools_changed(config.name)
        try:
            async with open_session(config, on_tools_changed=changed) as session:
                self._sessions[config.name] = session
                ready.set_result(session)
                await stop.wait()
        except BaseException as e:
            if not ready.done():
                ready.set_exception(McpUnavailableError(
                    f"MCP server {config.name!r}: cannot connect: {type(e).__name__}: {e}"))
            else:
                log.warning("MCP server %s disconnected: %r", config.name, e)
            if not isinstance(e, Exception):
                raise
        finally:
            self._sessions.pop(config.name, None)

    async def _list_tools(self, name: str) -> list[dict[str, Any]]:
        config = self.config(name)
        if config is None:
            raise McpUnavailableError(f"no MCP server {name!r} is configured")
        return await list_all_tools(await self._session(config))

    async def _call(self, config: McpServerConfig, tool: str, arguments: dict[str, Any],
                    limit: float) -> ToolAnswer:
        from mcp import MCPError
        from mcp.types import REQUEST_TIMEOUT

        session = await self._session(config)  # fails before anything is sent
        try:
            result = await session.call_tool(tool, arguments, read_timeout_seconds=limit)
        except MCPError as e:
            if e.code == REQUEST_TIMEOUT:
                raise McpTimeoutError(f"MCP server {config.name!r} did not answer {tool!r} "
                                      f"within {limit:g} s; it may still act on it") from e
            raise McpUnavailableError(f"MCP server {config.name!r} answered {tool!r} with "
                                      f"error {e.code}: {e.error.message}") from e
        except Exception as e:  # the connection broke mid-call
            raise McpUnavailableError(f"MCP server {config.name!r}: calling {tool!r} failed: "
                                      f"{type(e).__name__}: {e}") from e
        return _answer(result)

    async def _close_all(self) -> None:
        for stop in self._stops.values():
            stop.set()
        for _ in range(100):  # the sessions' exits stop their server processes
            if not self._sessions:
                return
            await asyncio.sleep(0.05)


def _answer(result: Any) -> ToolAnswer:
    import json

    texts = [getattr(c, "text", "") for c in result.content if getattr(c, "type", "") == "text"]
    text = "\n".join(texts)
    value: Any = result.structured_content
    if value is None:
        try:
            value = json.loads(text) if text else None
        except ValueError:
            value = text
    return ToolAnswer(result=value, text=text, is_error=bool(result.is_error))
