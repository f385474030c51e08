"""Flat tool lists from other ecosystems to catalogs: OpenAI `tools` and MCP `tools/list`.

Dotted or slashed names (`billing.invoices.create`) and a `namespace` field become branches.
Name segments are made valid catalog names; the original name is kept as `original_name`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from stackroute.runtime.errors import CatalogError, Problem

_SPLIT = re.compile(r"[./]")
_BAD = re.compile(r"[^A-Za-z0-9_\-]+")


def from_openai_tools(tools: Iterable[Mapping[str, Any]], *, name: str = "root",
                      description: str = "") -> dict[str, Any]:
    """A catalog document from an OpenAI-style `tools` list."""
    entries: list[tuple[Any, str, str, Any, dict[str, Any]]] = []
    for i, tool in enumerate(tools):
        fn = tool.get("function", tool) if isinstance(tool, Mapping) else None
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
            raise CatalogError([Problem(f"[{i}]", "expected {'type': 'function', 'function': "
                                                  "{'name': …}}")])
        entries.append((fn.get("namespace"), fn["name"], fn.get("description", ""),
                        fn.get("parameters"), {}))
    return _nest(entries, name, description)


def from_mcp_tools(result: Mapping[str, Any] | Iterable[Mapping[str, Any]], *,
                   name: str = "root", description: str = "",
                   server: str | None = None) -> dict[str, Any]:
    """A catalog document from an MCP `tools/list` result (or its `tools` list).

    With `server`, every leaf also gets `"mcp": {"server": server, "tool": NAME}` (the
    tool's own name), so the gateway's `mcp` handler forwards its calls to that server.

    >>> doc = from_mcp_tools([{"name": "files.delete", "inputSchema": {"type": "object"}}],
    ...                      name="fs", server="fs")
    >>> leaf = doc["children"][0]["children"][0]
    >>> leaf["name"], leaf["sensitive"], leaf["mcp"]
    ('delete', True, {'server': 'fs', 'tool': 'files.delete'})
    """
    tools = result.get("tools", []) if isinstance(result, Mapping) else result
    entries = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, Mapping) or not isinstance(tool.get("name"), str):
            raise CatalogError([Problem(f"[{i}]", "expected an MCP tool with a 'name'")])
        annotations = tool.get("annotations") or {}
        # MCP's defaults: readOnlyHint false, destructiveHint true. A tool that may change the
        # world destructively waits for confirmation unless it says otherwise.
        sensitive = not annotations.get("readOnlyHint", False) and bool(
            annotations.get("destructiveHint", True))
        extra: dict[str, Any] = {"sensitive": True} if sensitive else {}
        if server is not None:
            extra["mcp"] = {"server": server, "tool": tool["name"]}
        entries.append((tool.get("namespace"), tool["name"], tool.get("description", ""),
                        tool.get("inputSchema"), extra))
    return _nest(entries, name, description)


def _nest(entries: list[tuple[Any, str, str, Any, dict[str, Any]]], name: str,
          description: str) -> dict[str, Any]:
    root: dict[str, Any] = {"name": name, "description": description, "children": []}
    routers: dict[tuple[str, ...], dict[str, Any]] = {(): root}
    for namespace, tool_name, tool_description, parameters, extra in entries:
        segments = [s for s in _SPLIT.split(tool_name) if s]
        if isinstance(namespace, str) and namespace:
            segments = [s for s in _SPLIT.split(namespace) if s] + segments
        clean = [_clean(s) for s in segments] or [_clean(tool_name)]
        parent = root
        for depth in range(1, len(clean)):
            key = tuple(clean[:depth])
            if key not in routers:
                node = {"name": clean[depth - 1], "description": "", "children": []}
                parent["children"].append(node)
                routers[key] = node
            parent = routers[key]
        leaf: dict[str, Any] = {"name": clean[-1], "description": tool_description or "",
                                **extra}
        if parameters is not None:
            leaf["parameters"] = parameters
        if clean[-1] != tool_name:
            leaf["original_name"] = tool_name
        parent["children"].append(leaf)
    for key, router in routers.items():
        if key and not router["description"]:
            members: list[dict[str, Any]] = router["children"][:8]
            names = ", ".join(str(c["name"]) for c in members)
            router["description"] = f"Tools under {'.'.join(key)}: {names}"
    return root


def _clean(segment: str) -> str:
    s = _BAD.sub("_", segment).strip("_") or "tool"
    return s if s[0].isalpha() else f"x_{s}"
