"""A small MCP server (official `mcp` SDK, low-level `Server`) that serves one catalog subtree's
leaves as tools: the example servers of docs/mcp.md, the tests and `stackroute bench mcp`.

    python examples/mcp/catalog_server.py --field Sports
        --catalog ../shared/data/seal-tools/seal-tools.catalog.json
        [--transport stdio|http --port 8765] [--calls calls.jsonl]
        [--sensitive toolA,toolB] [--slow toolC --slow-s 30]

Every leaf under `--field` (a top-level child's name; the whole catalog without it) becomes a
tool named by its `original_name` (else its name), with its description and parameters as the
input schema. A call answers `{"tool", "arguments", "server"}` as structured content. Tools
named in `--sensitive` are marked `destructiveHint: true` (the others `readOnlyHint: true`),
so stackroute's importer gates them. Every call is appended to `--calls` (one JSON line,
flushed and fsynced) *before* it is answered, so a test can count what a server received even
when its caller dies mid-call; a tool named in `--slow` sleeps `--slow-s` seconds first. A tool
called `fail_*`, or any call whose arguments hold `"fail": true`, answers `isError`.
`--grow-after N`: after the N-th call the server adds one tool (`added_tool`) and sends
`notifications/tools/list_changed`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.stdio import stdio_server


def catalog_tools(catalog: Path, field: str | None) -> list[dict[str, Any]]:
    """The leaves under the top-level child `field` (all leaves without one) as tool specs."""
    root = json.loads(catalog.read_text(encoding="utf-8"))
    nodes = [root]
    if field is not None:
        nodes = [c for c in root.get("children", []) if c.get("name") == field]
        if not nodes:
            names = ", ".join(str(c.get("name")) for c in root.get("children", [])[:20])
            raise SystemExit(f"no top-level child {field!r} in {catalog} (have: {names}, …)")
    tools: list[dict[str, Any]] = []
    while nodes:
        node = nodes.pop(0)
        if "children" in node:
            nodes.extend(node["children"])
            continue
        tools.append({"name": node.get("original_name") or node["name"],
                      "description": node.get("description", ""),
                      "inputSchema": node.get("parameters") or {"type": "object"}})
    return tools


def build_server(name: str, tools: list[dict[str, Any]], *, calls: Path | None,
                 sensitive: set[str], slow: set[str], slow_s: float,
                 grow_after: int | None) -> Server[Any]:
    listed = list(tools)
    num_calls = 0

    def as_tool(spec: dict[str, Any]) -> types.Tool:
        hints = (types.ToolAnnotations(destructive_hint=True, read_only_hint=False)
                 if spec["name"] in sensitive else types.ToolAnnotations(read_only_hint=True))
        return types.Tool(name=spec["name"], description=spec["description"],
                          input_schema=spec["inputSchema"], annotations=hints)

    async def on_list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[as_tool(t) for t in listed])

    async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        nonlocal num_calls
        arguments = dict(params.arguments or {})
        if calls is not None:
            with calls.open("a", encoding="utf-8") as f:
                f.write(json.dumps({"server": name, "tool": params.name,
                                    "arguments": arguments}) + "\n")
                f.flush()
                os.fsync(f.fileno())
        num_calls += 1
        if params.name in slow:
            await anyio.sleep(slow_s)
        if params.name not in {t["name"] for t in listed}:
            return types.CallToolResult(content=[types.TextContent(
                type="text", text=f"unknown tool {params.name!r}")], is_error=True)
        if params.name.startswith("fail_") or arguments.get("fail") is True:
            return types.CallToolResult(content=[types.TextContent(
                type="text", text=f"{params.name} failed on purpose")], is_error=True)
        if grow_after is not None and num_calls == grow_after:
            listed.append({"name": "added_tool", "description": "A tool added at run time.",
                           "inputSchema": {"type": "object", "properties": {}}})
            await ctx.session.send_tool_list_changed()
        answer = {"tool": params.name, "arguments": arguments, "server": name}
        return types.CallToolResult(content=[types.TextContent(type="text",
                                                               text=json.dumps(answer))],
                                    structured_content=answer)

    return Server(name, version="1", on_list_tools=on_list_tools, on_call_tool=on_call_tool)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--catalog", type=Path, required=True)
    p.add_argument("--field", default=None)
    p.add_argument("--name", default=None, help="server name [default: the field]")
    p.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--calls", type=Path, default=None)
    p.add_argument("--sensitive", default="")
    p.add_argument("--slow", default="")
    p.add_argument("--slow-s", type=float, default=30.0)
    p.add_argument("--grow-after", type=int, default=None)
    args = p.parse_args(argv)
    name = args.name or args.field or "catalog"
    server = build_server(name, catalog_tools(args.catalog, args.field), calls=args.calls,
                          sensitive={s for s in args.sensitive.split(",") if s},
                          slow={s for s in args.slow.split(",") if s}, slow_s=args.slow_s,
                          grow_after=args.grow_after)
    if args.transport == "http":
        import uvicorn

        app = server.streamable_http_app(streamable_http_path="/mcp", host=args.host)
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
        return

    async def run_stdio() -> None:
        options = server.create_initialization_options(
            NotificationOptions(tools_changed=True))
        async with stdio_server() as (read, write):
            await server.run(read, write, options)

    anyio.run(run_stdio)


if __name__ == "__main__":
    sys.exit(main())
