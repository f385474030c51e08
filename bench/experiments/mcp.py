"""`stackroute bench mcp`: what an MCP client's model sees per request, connected to several
MCP servers directly vs through the stackroute gateway (issue 27).

Each Seal-Tools field is served by its own MCP server process (`examples/mcp/catalog_server.py`
over stdio); the gateway (`stackroute mcp CATALOG --mode both`, a real process, the MCP SDK's
client in front) imports them into one tree. Per single-tool query:

- `direct`: the client's model has every server's full `tools/list` in its prompt, then makes
  one call; it sees the tool list plus the call's result.
- `route`: it has the gateway's route-mode tools (`route`, `result`, `approve`) and sees the
  `route` answer; the embedded model picks the tool (`success`: the called tool is gold).
- `discover`: it has the gateway's discovery tools and walks the tree: `list_children` along
  the gold path, `describe_leaf`, `call_leaf`; this walker is an oracle (it follows the gold
  path), so its `success` is 1 by construction and its tokens and calls are a lower bound.

Tokens are counted with the embedded model's tokenizer (SmolLM2-135M's `tokenizer.json`) over
the JSON a client would put in its prompt (tool definitions as `tools/list` gives them, tool
results' text). A client's own model tokenizes differently; the ratios carry over roughly.

    stackroute bench mcp [--smoke] [--out DIR] [--fields Law,Finance,...] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import sys
import time
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import Any

import anyio

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_SERVER = REPO_ROOT / "examples" / "mcp" / "catalog_server.py"
DEFAULT_FIELDS = ("Law", "Finance", "Education", "Sports")
SMOKE_FIELDS = ("Law", "Finance", "Education")
ROUTE_TOOLS = ("route", "result", "approve")
DISCOVER_TOOLS = ("list_children", "describe_leaf", "call_leaf", "approve")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="stackroute bench mcp", description=__doc__.split("\n\n")[0])
    p.add_argument("--smoke", action="store_true", help="3 servers, 3 queries")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--data", type=Path, default=REPO_ROOT.parent / "shared" / "data")
    p.add_argument("--fields", default=None, help="Seal-Tools fields, one server each")
    p.add_argument("--limit", type=int, default=None, help="queries (default 24; smoke 3)")
    p.add_argument("--max-wait-s", type=float, default=120.0,
                   help="a route still running after this counts as not done (the gateway's "
                        "--max-wait-s)")
    given = list(sys.argv[1:] if argv is None else argv)
    args = p.parse_args(given)
    fields = tuple(args.fields.split(",")) if args.fields else (
        SMOKE_FIELDS if args.smoke else DEFAULT_FIELDS)
    limit = args.limit or (3 if args.smoke else 24)
    out = args.out or REPO_ROOT / "bench" / "results" / (
        f"{date.today().isoformat()}-cpu-mcp{'-smoke' if args.smoke else ''}")
    summary = run(args.data / "seal-tools", fields=fields, limit=limit, out=out,
                  max_wait_s=args.max_wait_s,
                  command=shlex.join(["stackroute", "bench", "mcp", *given]))
    print(json.dumps(summary["table"], indent=1))
    return 0


def run(seal: Path, *, fields: Sequence[str], limit: int, out: Path,
        max_wait_s: float = 120.0, command: str = "stackroute bench mcp") -> dict[str, Any]:
    from stackroute.bench.environment import environment

    out.mkdir(parents=True, exist_ok=True)
    catalog = seal / "seal-tools.catalog.json"
    queries = _queries(seal, catalog, fields, limit)
    gateway_catalog = _import(catalog, fields, out)
    tokenizer = _tokenizer()
    items = anyio.run(_measure, gateway_catalog, catalog, fields, queries, tokenizer, out,
                      max_wait_s)
    _add_routed(items, out / "gateway.db")
    with (out / "items.jsonl").open("w", encoding="utf-8") as f:
        for item in items:
            f.write(json.dumps(item, ensure_ascii=False) + "\n")
    summary = {"fields": list(fields), "num_queries": len(items),
               "tokenizer": "SmolLM2-135M-Instruct (the embedded model's tokenizer.json)",
               "table": _table(items), "environment": environment(),
               "machine_note": "2-core shared VM, 8 helpers' jobs running beside it"}
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    (out / "command.txt").write_text(command + "\n")
    return summary


def _queries(seal: Path, catalog: Path, fields: Sequence[str], limit: int,
             ) -> list[dict[str, Any]]:
    """Single-tool dev/test queries whose gold leaf is under one of `fields`, spread over
    the fields in turn; each with its gold MCP tool name."""
    root = json.loads(catalog.read_text(encoding="utf-8"))
    tool_of: dict[str, str] = {}
    for field in root["children"]:
        for sub in field.get("children", []):
            for leaf in sub.get("children", []):
                tool_of[f"{field['name']}/{sub['name']}/{leaf['name']}"] = (
                    leaf.get("original_name") or leaf["name"])
    by_field: dict[str, list[dict[str, Any]]] = {f: [] for f in fields}
    for name in ("dev.queries.jsonl", "test.queries.jsonl"):
        for line in (seal / name).read_text(encoding="utf-8").splitlines():
            q = json.loads(line)
            gold = q.get("gold") or []
            if len(gold) == 1 and gold[0].split("/")[0] in by_field and gold[0] in tool_of:
                by_field[gold[0].split("/")[0]].append(
                    {"id": q["id"], "query": q["query"], "gold": gold[0],
                     "server": gold[0].split("/")[0], "tool": tool_of[gold[0]]})
    picked: list[dict[str, Any]] = []
    while len(picked) < limit and any(by_field.values()):
        for field in fields:
            if by_field[field] and len(picked) < limit:
                picked.append(by_field[field].pop(0))
    return picked


def _server_specs(catalog: Path, fields: Sequence[str], out: Path) -> dict[str, Any]:
    return {f: {"command": sys.executable,
                "args": [str(EXAMPLE_SERVER), "--catalog", str(catalog), "--field", f,
                         "--calls", str(out / f"calls-{f}.jsonl")]} for f in fields}


def _import(catalog: Path, fields: Sequence[str], out: Path) -> Path:
    from stackroute.server.embeddings.vector_cache import CachedEmbedder
    from stackroute.server.mcp.config import parse_servers
    from stackroute.server.mcp.importer import import_servers

    document = import_servers(parse_servers(_server_specs(catalog, fields, out)),
                              name="tools", embedder=CachedEmbedder.for_default_model())
    path = out / "gateway.catalog.json"
    path.write_text(json.dumps(document, ensure_ascii=False, indent=1) + "\n")
    return path


def _tokenizer() -> Any:
    from stackroute.server.engines.model_store import resolve_model
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(resolve_model(None) / "tokenizer.json"))


async def _measure(gateway_catalog: Path, catalog: Path, fields: Sequence[str],
                   queries: list[dict[str, Any]], tokenizer: Any, out: Path,
                   max_wait_s: float) -> list[dict[str, Any]]:
    from mcp import ClientSession, StdioServerParameters, stdio_client
    from stackroute.server.mcp.config import parse_servers
    from stackroute.server.mcp.connections import open_session, tool_dicts

    def tokens(value: Any) -> int:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        return len(tokenizer.encode(text).ids)

    # direct: every server's tools/list (one session per server, as a client would hold)
    direct_tools: list[dict[str, Any]] = []
    direct_sessions: dict[str, Any] = {}
    async with _sessions(parse_servers(_server_specs(catalog, fields, out)),
                         open_session) as sessions:
        for name, session in sessions.items():
            direct_tools.extend(tool_dicts(await session.list_tools()))
            direct_sessions[name] = session
        tools_list_tokens = tokens(direct_tools)
        direct: dict[str, dict[str, Any]] = {}
        for q in queries:
            started = time.perf_counter()
            result = await direct_sessions[q["server"]].call_tool(q["tool"], {})
            direct[q["id"]] = {"tokens": tools_list_tokens + tokens(_text(result)),
                               "calls": 1, "latency_ms": _ms(started)}

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "stackroute.server.cli", "mcp",
                                      str(gateway_catalog), "--mode", "both", "--db",
                                      str(out / "gateway.db"), "--max-wait-s",
                                      str(max_wait_s)],
        env={**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")},
        cwd=str(REPO_ROOT))
    items: list[dict[str, Any]] = []
    async with stdio_client(params) as (read, write), \
            ClientSession(read, write, read_timeout_seconds=900) as gateway:
        await gateway.initialize()
        listed = tool_dicts(await gateway.list_tools())
        route_list = tokens([t for t in listed if t["name"] in ROUTE_TOOLS])
        discover_list = tokens([t for t in listed if t["name"] in DISCOVER_TOOLS])
        for q in queries:
            started = time.perf_counter()
            routed = await gateway.call_tool("route", {"request": q["query"]})
            route_ms = _ms(started)
            answer = routed.structured_content or {}
            called = [c["path"].rsplit("/", 1)[-1] for c in answer.get("calls", [])]
            walk = await _walk(gateway, q, tokens)
            items.append({
                "id": q["id"], "query": q["query"], "gold": q["gold"], "tool": q["tool"],
                "direct": direct[q["id"]],
                "route": {"tokens": route_list + tokens(_text(routed)), "calls": 1,
                          "latency_ms": route_ms, "status": answer.get("status"),
                          "session": answer.get("id"),
                          "called": called, "success": called == [q["tool"]]},
                "discover": {**walk, "tokens": discover_list + walk["tokens"]},
            })
            print(f"{q['id']}: route {answer.get('status')} {called} "
                  f"(gold {q['tool']}) {route_ms:.0f} ms", file=sys.stderr)
    return items


async def _walk(gateway: Any, q: dict[str, Any], tokens: Any) -> dict[str, Any]:
    """The oracle walker: list_children down the gold tool's path, describe, call."""
    started = time.perf_counter()
    seen = 0
    calls = 0
    path = ""
    leaf_path = None
    while leaf_path is None:
        listed = await gateway.call_tool("list_children", {"path": path})
        calls += 1
        seen += tokens(_text(listed))
        children = (listed.structured_content or {}).get("children", [])
        leaf = next((c for c in children if c["kind"] == "leaf" and c["name"] == q["tool"]),
                    None)
        if leaf is not None:
            leaf_path = f"{path}/{leaf['name']}".strip("/")
            break
        path = await _next_router(gateway, path, children, q)
        if path is None:
            return {"tokens": seen, "calls": calls, "latency_ms": _ms(started),
                    "success": False}
    described = await gateway.call_tool("describe_leaf", {"path": leaf_path})
    seen += tokens(_text(described))
    arguments = _sample_arguments((described.structured_content or {}).get("parameters", {}))
    called = await gateway.call_tool("call_leaf", {"path": leaf_path, "arguments": arguments})
    seen += tokens(_text(called))
    return {"tokens": seen, "calls": calls + 2, "latency_ms": _ms(started),
            "success": (called.structured_content or {}).get("status") == "done"}


async def _next_router(gateway: Any, path: str, children: list[dict[str, Any]],
                       q: dict[str, Any]) -> str | None:
    """The child router whose subtree holds the gold tool (the oracle's step; searching is
    not counted as the client's: a real walker would read only the branch it picks)."""
    if not path:
        return q["server"]
    for child in children:
        if child["kind"] != "router":
            continue
        candidate = f"{path}/{child['name']}"
        if await _holds(gateway, candidate, q["tool"]):
            return candidate
    return None


async def _holds(gateway: Any, path: str, tool: str) -> bool:
    listed = await gateway.call_tool("list_children", {"path": path})
    for child in (listed.structured_content or {}).get("children", []):
        if child["kind"] == "leaf" and child["name"] == tool:
            return True
        if child["kind"] == "router" and await _holds(gateway, f"{path}/{child['name']}", tool):
            return True
    return False


def _sample_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    samples = {"string": "x", "integer": 1, "number": 1.0, "boolean": True, "array": [],
               "object": {}}
    props = schema.get("properties", {})
    return {n: samples.get(props.get(n, {}).get("type", "string"), "x")
            for n in schema.get("required", [])}


class _sessions:
    """Sessions to several servers at once, opened and closed together."""

    def __init__(self, configs: Sequence[Any], opener: Any) -> None:
        self.configs, self.opener = configs, opener
        self._stack: Any = None

    async def __aenter__(self) -> dict[str, Any]:
        from contextlib import AsyncExitStack

        self._stack = AsyncExitStack()
        await self._stack.__aenter__()
        return {c.name: await self._stack.enter_async_context(self.opener(c))
                for c in self.configs}

    async def __aexit__(self, *exc: Any) -> None:
        await self._stack.__aexit__(*exc)


def _add_routed(items: list[dict[str, Any]], db: Path) -> None:
    """`route.routed_to_gold`: whether the embedded model chose the gold tool at some routing
    call (from the gateway's trace), apart from whether the call completed in time (argument
    generation on this loaded 2-core VM can take minutes)."""
    import sqlite3

    with sqlite3.connect(db) as conn:
        for item in items:
            rows = conn.execute("SELECT event FROM transitions WHERE session_id = ?",
                                (item["route"]["session"],)).fetchall()
            decisions = [json.loads(r[0]).get("decision") for r in rows]
            item["route"]["routed_to_gold"] = item["tool"] in decisions


def _text(result: Any) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 1)


def _table(items: list[dict[str, Any]]) -> dict[str, Any]:
    def mean(mode: str, key: str) -> float:
        return round(statistics.fmean(float(i[mode][key]) for i in items), 1) if items else 0.0

    def p50(mode: str) -> float:
        return round(statistics.median(i[mode]["latency_ms"] for i in items), 1) if items else 0

    table: dict[str, Any] = {}
    for mode in ("direct", "route", "discover"):
        table[mode] = {"tokens_mean": mean(mode, "tokens"), "calls_mean": mean(mode, "calls"),
                       "latency_ms_p50": p50(mode)}
    table["route"]["success"] = sum(bool(i["route"]["success"]) for i in items)
    table["route"]["routed_to_gold"] = sum(bool(i["route"].get("routed_to_gold"))
                                           for i in items)
    table["route"]["done_in_time"] = sum(i["route"]["status"] == "done" for i in items)
    table["discover"]["success"] = sum(bool(i["discover"]["success"]) for i in items)
    table["direct"]["success"] = "n/a (the client's model picks among all tools)"
    base = table["direct"]["tokens_mean"] or 1.0
    for mode in ("route", "discover"):
        table[mode]["tokens_vs_direct"] = round(table[mode]["tokens_mean"] / base, 3)
    return table


if __name__ == "__main__":
    raise SystemExit(main())
