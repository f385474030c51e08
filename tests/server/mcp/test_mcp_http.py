"""`/mcp` on `stackroute serve`: the MCP SDK's streamable-HTTP client against the real app on
loopback, behind the API key like every other route (tier c: the app's engine is the
embedded model's)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from live_server import serve, server_settings
from mcp_kit import seal_catalog, stdio_spec, wait_for_calls
from stackroute.server.http.app import create_app
from stackroute.server.mcp.config import parse_servers
from stackroute.server.mcp.importer import ImportOptions, import_servers

pytestmark = pytest.mark.model
KEY = "mcp-test-key"


def test_mcp_on_serve_needs_the_api_key_and_forwards_calls(
        engine: Any, shared_data: Path, tmp_path: Path) -> None:
    calls = tmp_path / "law.jsonl"
    servers = parse_servers({"Law": stdio_spec(seal_catalog(shared_data), "Law", calls)})
    catalog = tmp_path / "law.json"
    catalog.write_text(json.dumps(import_servers(servers, name="tools",
                                                 options=ImportOptions(max_flat=1000))))
    # leaf_isolation "process" (the default): MCP leaves still forward from this process
    settings = server_settings(tmp_path, catalogs=[catalog], api_key=KEY,
                               mcp_mode="discover")
    with serve(create_app(settings, engine=engine)) as base_url:
        refused = httpx.post(f"{base_url}/mcp", json={"jsonrpc": "2.0", "id": 1,
                                                       "method": "tools/list"})
        assert refused.status_code == 401
        names, answer = anyio.run(_use_gateway, f"{base_url}/mcp")
    assert sorted(names) == ["approve", "call_leaf", "describe_leaf", "list_children"]
    assert answer["status"] == "done" and answer["result"]["server"] == "Law"
    assert [c["tool"] for c in wait_for_calls(calls, 1)] == ["getCivilLaw"]


async def _use_gateway(url: str) -> tuple[list[str], dict[str, Any]]:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with create_mcp_http_client(headers={"Authorization": f"Bearer {KEY}"}) as http, \
            streamable_http_client(url, http_client=http) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        names = [t.name for t in (await session.list_tools()).tools]
        result = await session.call_tool("call_leaf", {"path": "Law/getCivilLaw",
                                                       "arguments": {"country": "France"}})
        if result.is_error:
            raise AssertionError(" ".join(getattr(c, "text", "") for c in result.content))
        return names, dict(result.structured_content or {})
