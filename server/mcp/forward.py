"""The `mcp` handler kind: a leaf with `"mcp": {"server": NAME, "tool": TOOL}` forwards its
call to that tool on that MCP server.

It is a `LeafResolver` of the service's `HandlerTable`, so an MCP leaf runs through the same
executors as a local handler: the session's `StoreExecutor` records the call as begun before
this handler sends anything and records its outcome after, so a call recorded as begun is
never sent twice, even after a crash. What the server answers maps to leaf outcomes: a
result (structured content, else its text), or a leaf error for an `isError` result
(`McpToolError`), a protocol or connection error (`McpUnavailableError`) and a timeout
(`McpTimeoutError`, shorter than the executor's own limit so it is the one reported).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stackroute.runtime.errors import HandlerError, StackrouteError
from stackroute.runtime.handlers import Handler
from stackroute.runtime.tree import Node
from stackroute.server.mcp.config import LEAF_FIELD
from stackroute.server.mcp.connections import McpConnections

TIMEOUT_MARGIN_S = 2.0  # the MCP call's limit sits this far inside the leaf executor's


class McpToolError(StackrouteError):
    """The MCP tool answered with `isError: true`; the message is its text."""


def leaf_target(leaf: Node) -> tuple[str, str] | None:
    """`(server, tool)` of an MCP leaf, None for another leaf; `HandlerError` when its
    `mcp` field is malformed."""
    spec = leaf.metadata.get(LEAF_FIELD)
    if spec is None:
        return None
    if not (isinstance(spec, Mapping) and isinstance(spec.get("server"), str)
            and isinstance(spec.get("tool"), str)):
        raise HandlerError(f"leaf {leaf.path_str}: '{LEAF_FIELD}' must be "
                           f"{{'server': NAME, 'tool': TOOL}}, got {spec!r}")
    return spec["server"], spec["tool"]


class McpForwarding:
    """Resolves MCP leaves to handlers that call their tool over `connections`."""

    def __init__(self, connections: McpConnections, *, timeout_s: float) -> None:
        self.connections = connections
        self.timeout_s = max(0.5, timeout_s - TIMEOUT_MARGIN_S)

    def serves(self, leaf: Node) -> bool:
        return LEAF_FIELD in leaf.metadata

    def resolve(self, leaf: Node) -> Handler:
        target = leaf_target(leaf)
        if target is None:
            raise HandlerError(f"leaf {leaf.path_str} is not an MCP leaf")
        server, tool = target
        if self.connections.config(server) is None:
            known = ", ".join(self.connections.names) or "none"
            raise HandlerError(f"leaf {leaf.path_str} forwards to MCP server {server!r}, which "
                               f"this gateway does not run (configured: {known}); only an "
                               "operator's catalog files may name MCP servers")

        def forward(**arguments: Any) -> Any:
            return self.call(server, tool, arguments)

        return forward

    def call(self, server: str, tool: str, arguments: dict[str, Any]) -> Any:
        """The tool's result; raises the typed errors above (the executor records them)."""
        answer = self.connections.call_tool(server, tool, arguments, timeout_s=self.timeout_s)
        if answer.is_error:
            raise McpToolError(answer.text or f"{tool} reported an error with no text")
        return answer.result
