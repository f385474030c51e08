"""`stackroute mcp` as a real process in front of three real MCP servers (two stdio, one
streamable HTTP), driven by the MCP SDK's own client (tier c: the gateway loads the embedded
model).

Which parts are the model's: `test_route_*` route a request with the embedded model (requests
it routes right; the assertion is on the tool it reached). The discovery and approval tests
are deterministic: the client walks the tree itself with the meta-tools.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp_kit import (
    ENV,
    LAW_SENSITIVE,
    REPO_ROOT,
    GatewayClient,
    http_server,
    recorded_calls,
    seal_catalog,
    servers_config,
    wait_for_calls,
)

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def gateway_catalog(shared_data: Path, tmp_path_factory: pytest.TempPathFactory,
                    ) -> Iterator[tuple[Path, Path]]:
    """`stackroute catalog import-mcp` over the three servers; yields (catalog, calls dir)
    while the HTTP server runs."""
    work = tmp_path_factory.mktemp("mcp-gateway")
    catalog = seal_catalog(shared_data)
    with http_server(catalog, "Finance", work / "finance.jsonl") as url:
        servers = work / "servers.json"
        servers.write_text(json.dumps(servers_config(catalog, work, url)))
        out = work / "gateway.json"
        done = subprocess.run([sys.executable, "-m", "stackroute.server.cli", "catalog",
                               "import-mcp", str(servers), "-o", str(out), "--name", "tools"],
                              env={**ENV, "PATH": os.environ.get("PATH", "")},
                              cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert "3 servers, 115 tools" in done.stderr
        yield out, work


@pytest.fixture(scope="module")
def client(gateway_catalog: tuple[Path, Path]) -> Iterator[GatewayClient]:
    catalog, work = gateway_catalog
    gateway = GatewayClient(["mcp", str(catalog), "--mode", "both",
                             "--db", str(work / "gateway.db")])
    yield gateway
    gateway.close()


def test_the_gateway_lists_its_own_tools_not_the_servers(client: GatewayClient) -> None:
    assert sorted(client.tool_names()) == sorted(
        ["route", "result", "supply_values", "list_children", "describe_leaf", "call_leaf",
         "approve"])


def test_discovery_walks_to_a_tool_of_the_second_server(
        client: GatewayClient, gateway_catalog: tuple[Path, Path]) -> None:
    _, work = gateway_catalog
    root = client.call("list_children", {"path": ""})
    assert [c["name"] for c in root["children"]] == ["Law", "Finance", "Sports"]
    path = _walk_to(client, "Finance", "getCurrencyExchangeRate")
    described = client.call("describe_leaf", {"path": path})
    assert "base_currency" in described["parameters"]["properties"]
    before = len(recorded_calls(work / "finance.jsonl"))
    answer = client.call("call_leaf", {"path": path, "arguments": {
        "base_currency": "USD", "target_currency": "EUR"}})
    assert answer["status"] == "done"
    assert answer["result"] == {"tool": "getCurrencyExchangeRate", "server": "Finance",
                                "arguments": {"base_currency": "USD",
                                              "target_currency": "EUR"}}
    assert len(wait_for_calls(work / "finance.jsonl", before + 1)) == before + 1
    with pytest.raises(RuntimeError, match="do not match its schema"):
        client.call("call_leaf", {"path": path, "arguments": {"base_currency": 3}})


def test_a_sensitive_tool_pauses_until_approved(client: GatewayClient,
                                                gateway_catalog: tuple[Path, Path]) -> None:
    _, work = gateway_catalog
    path = _walk_to(client, "Law", LAW_SENSITIVE)
    described = client.call("describe_leaf", {"path": path})
    assert described["sensitive"] is True
    arguments = {"lawsuit_id": "L-7"}
    before = len(recorded_calls(work / "law.jsonl"))
    paused = client.call("call_leaf", {"path": path, "arguments": arguments})
    assert paused["status"] == "paused"  # this client declares no elicitation support
    assert len(recorded_calls(work / "law.jsonl")) == before  # nothing sent yet
    done = client.call("approve", {"id": paused["id"]})
    assert done["status"] == "done" and done["result"]["tool"] == LAW_SENSITIVE
    assert len(wait_for_calls(work / "law.jsonl", before + 1)) == before + 1
    rejected = client.call("call_leaf", {"path": path, "arguments": arguments})
    assert client.call("approve", {"id": rejected["id"], "approve": False})["status"] \
        == "rejected"
    with pytest.raises(RuntimeError, match="no session"):
        client.call("approve", {"id": rejected["id"]})  # used up
    assert len(recorded_calls(work / "law.jsonl")) == before + 1


def test_route_reaches_a_tool_of_the_second_server(client: GatewayClient,
                                                   gateway_catalog: tuple[Path, Path]) -> None:
    """The embedded model routes this request (checked to route right on this catalog)."""
    _, work = gateway_catalog
    before = len(recorded_calls(work / "finance.jsonl"))
    answer = client.call("route", {"request": "Get the current exchange rate from USD to EUR"})
    assert answer["status"] == "done", answer
    [call] = answer["calls"]
    assert call["path"].endswith("/getCurrencyExchangeRate")
    assert call["result"]["server"] == "Finance"
    assert len(wait_for_calls(work / "finance.jsonl", before + 1)) == before + 1


def test_route_puts_a_gate_to_the_user_by_elicitation(
        gateway_catalog: tuple[Path, Path]) -> None:
    """A client that supports elicitation is asked; its yes runs the call (model-routed)."""
    catalog, work = gateway_catalog
    gateway = GatewayClient(["mcp", str(catalog), "--mode", "route",
                             "--db", str(work / "elicit.db")], answer_elicitation=True)
    try:
        before = len(recorded_calls(work / "law.jsonl"))
        answer = gateway.call("route", {"request": "What is the status of lawsuit L-42?"})
    finally:
        gateway.close()
    assert gateway.elicited and LAW_SENSITIVE in gateway.elicited[0]
    assert answer["status"] == "done", answer
    assert answer["calls"][0]["result"]["tool"] == LAW_SENSITIVE
    assert len(wait_for_calls(work / "law.jsonl", before + 1)) == before + 1


def test_route_declines_a_request_no_tool_serves(shared_data: Path, tmp_path: Path) -> None:
    """With the out-of-scope check on (`--abstain`: the embedded default's check, the
    evidence's margin and lead and the request's values, no model call), a request no
    Seal-Tools tool serves gets no call, and the answer names the closest tool and why:
    through the MCP SDK's own client, as an agent reads it. (On this catalog the router
    reaches a leaf for it and the check stops it there, as `stackroute run --abstain` shows.)"""
    gateway = GatewayClient(["mcp", str(seal_catalog(shared_data)), "--mode", "route",
                             "--abstain", "--db", str(tmp_path / "abstain.db")])
    try:
        answer = gateway.call("route", {"request": "Hi there! How are you doing today?"})
    finally:
        gateway.close()
    assert answer["status"] == "done" and answer["calls"] == [], answer
    declined = answer["declined"]
    assert declined["path"] and declined["fit"] < declined["threshold"], declined
    assert "no tool does what the request asks" in answer["message"]


def _walk_to(client: GatewayClient, server: str, tool: str) -> str:
    """The path of `tool` under `server`, found the way a client's model would: listing."""
    frontier = [server]
    while frontier:
        path = frontier.pop(0)
        for child in client.call("list_children", {"path": path})["children"]:
            child_path = f"{path}/{child['name']}"
            if child["kind"] == "router":
                frontier.append(child_path)
            elif child["name"] == tool:
                return child_path
    raise AssertionError(f"{tool} not found under {server}")
