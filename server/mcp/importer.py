"""MCP servers' `tools/list` to one catalog: a subtree per server (`from_mcp_tools`, each leaf
naming its server and tool), grouped by `build-tree` below a server with more tools than
`max_flat`, and the servers themselves kept in the root's `mcp_servers` field so that
`serve` and `stackroute mcp` can reconnect, re-import and forward calls.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stackroute.runtime.catalog import build_tree
from stackroute.runtime.errors import InputError
from stackroute.runtime.importers import from_mcp_tools
from stackroute.server.mcp.config import CATALOG_FIELD, McpServerConfig, parse_servers
from stackroute.server.mcp.connections import fetch_tools

MAX_DESCRIPTION_NAMES = 8


@dataclass(frozen=True, kw_only=True)
class ImportOptions:
    """How servers become a tree. A server with more than `max_flat` tools gets routers
    (build-tree, `min_children`..`max_children` per router) between it and its tools."""

    max_flat: int = 12
    min_children: int = 6
    max_children: int = 12
    seed: int = 0

    def to_dict(self) -> dict[str, int]:
        return {"max_flat": self.max_flat, "min_children": self.min_children,
                "max_children": self.max_children, "seed": self.seed}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> ImportOptions:
        known = {"max_flat", "min_children", "max_children", "seed"}
        data = dict(data or {})
        unknown = set(data) - known
        if unknown:
            raise InputError(f"unknown MCP import options {sorted(unknown)}; expected "
                             f"{sorted(known)}")
        return cls(**{k: int(v) for k, v in data.items()})


def server_subtree(config: McpServerConfig, tools: Sequence[Mapping[str, Any]], *,
                   embedder: Any | None, options: ImportOptions) -> dict[str, Any]:
    """One server's router: its tools as leaves (forwarding to it), grouped when wide."""
    names = [str(t.get("name")) for t in tools[:MAX_DESCRIPTION_NAMES]]
    more = f" (+{len(tools) - len(names)} more)" if len(tools) > len(names) else ""
    description = (f"Tools of the MCP server {config.name}: {', '.join(names)}{more}"
                   if tools else f"The MCP server {config.name} (no tools listed)")
    doc = from_mcp_tools(list(tools), name=config.name, description=description,
                         server=config.name)
    if not doc["children"]:
        raise InputError(f"MCP server {config.name!r} lists no tools; a catalog needs at "
                         "least one leaf per server")
    if len(tools) > options.max_flat and embedder is not None:
        from stackroute.server.tools.tree_builder import build_tree_from_flat

        built = build_tree_from_flat(doc, embedder=embedder, min_children=options.min_children,
                                     max_children=options.max_children, seed=options.seed)
        doc = {"name": config.name, "description": description,
               "children": built["children"]}
    return doc


def gateway_catalog(servers: Sequence[McpServerConfig],
                    tools_by_server: Mapping[str, Sequence[Mapping[str, Any]]], *,
                    name: str = "mcp", embedder: Any | None = None,
                    options: ImportOptions | None = None) -> dict[str, Any]:
    """The catalog document over `servers` (validated: it loads as it is)."""
    options = options or ImportOptions()
    children = [server_subtree(c, tools_by_server[c.name], embedder=embedder, options=options)
                for c in servers]
    root: dict[str, Any] = {
        "name": name,
        "description": "Tools of the MCP servers " + ", ".join(c.name for c in servers),
        CATALOG_FIELD: {c.name: c.to_dict() for c in servers},
        "mcp_import": options.to_dict(),
        "children": children,
    }
    build_tree(root)
    return root


def import_servers(servers: Sequence[McpServerConfig], *, name: str = "mcp",
                   embedder: Any | None = None,
                   options: ImportOptions | None = None) -> dict[str, Any]:
    """Read every server's `tools/list` (each over its own session, concurrently) and build
    the gateway catalog."""
    async def fetch_all() -> list[list[dict[str, Any]]]:
        return list(await asyncio.gather(*(fetch_tools(c) for c in servers)))

    listed = asyncio.run(fetch_all())
    return gateway_catalog(servers, {c.name: t for c, t in zip(servers, listed, strict=True)},
                           name=name, embedder=embedder, options=options)


def catalog_servers(document: Mapping[str, Any]) -> list[McpServerConfig]:
    """The servers a catalog document names in its root's `mcp_servers` field (none: [])."""
    field = document.get(CATALOG_FIELD)
    if field is None:
        field = (document.get("metadata") or {}).get(CATALOG_FIELD)
    return [] if field is None else parse_servers(field)


def refreshed_catalog(document: Mapping[str, Any], tools_by_server: Mapping[str, Any], *,
                      embedder: Any | None) -> dict[str, Any]:
    """`document` rebuilt from its servers' current tools (same name, servers, options)."""
    return gateway_catalog(catalog_servers(document), tools_by_server,
                           name=str(document["name"]), embedder=embedder,
                           options=ImportOptions.from_dict(document.get("mcp_import")))
