"""The MCP gateway's client side against real MCP server processes (the SDK on both ends):
three servers' tools/list imported into one tree, calls forwarded with their errors mapped,
the recorded executor sending a call once, and tools/list_changed seen. No routing model."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp_kit import (
    LAW_SENSITIVE,
    http_server,
    recorded_calls,
    seal_catalog,
    servers_config,
    stdio_spec,
    wait_for_calls,
)
from stackroute.runtime.catalog import build_tree
from stackroute.runtime.errors import HandlerError
from stackroute.runtime.handlers import HandlerTable, LocalExecutor
from stackroute.runtime.process_executor import ProcessExecutor
from stackroute.runtime.state import arguments_digest
from stackroute.runtime.tree import CapabilityTree
from stackroute.server.mcp.config import McpConfigError, parse_servers
from stackroute.server.mcp.connections import McpConnections, McpTimeoutError
from stackroute.server.mcp.forward import McpForwarding, McpToolError
from stackroute.server.mcp.importer import (
    ImportOptions,
    catalog_servers,
    import_servers,
    refreshed_catalog,
)
from stackroute.server.service.store import SessionStore
from stackroute.server.service.store_executor import StoreExecutor


@pytest.fixture(scope="module")
def servers(shared_data: Path, tmp_path_factory: pytest.TempPathFactory,
            ) -> Iterator[tuple[dict[str, Any], Path]]:
    calls_dir = tmp_path_factory.mktemp("mcp-calls")
    catalog = seal_catalog(shared_data)
    with http_server(catalog, "Finance", calls_dir / "finance.jsonl") as url:
        yield servers_config(catalog, calls_dir, url), calls_dir


@pytest.fixture(scope="module")
def document(servers: tuple[dict[str, Any], Path]) -> dict[str, Any]:
    from stackroute.server.embeddings.vector_cache import CachedEmbedder

    config, _ = servers
    return import_servers(parse_servers(config), name="gateway",
                          embedder=CachedEmbedder.for_default_model())


@pytest.fixture
def connections(servers: tuple[dict[str, Any], Path]) -> Iterator[McpConnections]:
    config, _ = servers
    conns = McpConnections(default_timeout_s=10.0)
    for server in parse_servers(config):
        conns.add(server)
    yield conns
    conns.close()


def test_three_servers_import_into_one_tree(document: dict[str, Any]) -> None:
    tree = build_tree(document)
    assert [c.name for c in tree.root.children] == ["Law", "Finance", "Sports"]
    leaves = list(tree.leaves())
    by_server: dict[str, int] = {}
    for leaf in leaves:
        target = leaf.metadata["mcp"]
        assert leaf.path[0] == target["server"]
        by_server[target["server"]] = by_server.get(target["server"], 0) + 1
        assert leaf.sensitive is (target["tool"] == LAW_SENSITIVE)
    assert by_server == {"Law": 20, "Finance": 27, "Sports": 68}  # the fields' tool counts
    sports = tree.node("Sports")
    assert all(not c.is_leaf for c in sports.children)  # 68 > max_flat: build-tree below
    assert 6 <= len(sports.children) <= 12
    assert [c.name for c in catalog_servers(document)] == ["Law", "Finance", "Sports"]


def test_forwarded_calls_map_results_and_errors(document: dict[str, Any],
                                                connections: McpConnections) -> None:
    tree = build_tree(document)
    forwarding = McpForwarding(connections, timeout_s=30.0)
    rate = _leaf(tree, "getCurrencyExchangeRate")
    handler = forwarding.resolve(rate)
    assert handler(base_currency="USD", target_currency="EUR") == {
        "tool": "getCurrencyExchangeRate", "server": "Finance",
        "arguments": {"base_currency": "USD", "target_currency": "EUR"}}
    with pytest.raises(McpToolError, match="failed on purpose"):
        handler(base_currency="USD", target_currency="EUR", fail=True)
    slow = McpForwarding(connections, timeout_s=3.0)  # 1 s once the margin is taken off
    with pytest.raises(McpTimeoutError, match="within 1 s"):
        slow.resolve(_leaf(tree, "getBasketballScore"))(team="Lakers")
    ghost = build_tree({"name": "r", "children": [
        {"name": "x", "description": "", "mcp": {"server": "Nowhere", "tool": "x"}}]})
    with pytest.raises(HandlerError, match="does not run"):
        forwarding.resolve(ghost.node("x"))


def test_recorded_executor_sends_a_call_once(document: dict[str, Any],
                                             connections: McpConnections,
                                             servers: tuple[dict[str, Any], Path],
                                             tmp_path: Path) -> None:
    _, calls_dir = servers
    law_calls = calls_dir / "law.jsonl"
    before = len(recorded_calls(law_calls))
    tree = build_tree(document)
    leaf = _leaf(tree, "getCivilLaw")
    arguments = {"topic": "contracts"}
    handlers = HandlerTable(resolvers=[McpForwarding(connections, timeout_s=30.0)])
    store = SessionStore(tmp_path / "calls.db")
    executor = StoreExecutor(store, LocalExecutor(handlers))
    first = executor.execute(leaf, arguments, "run:0")
    again = executor.execute(leaf, arguments, "run:0")
    assert first.error is None and first.result["server"] == "Law"
    assert again.is_replayed and again.result == first.result
    # begun but never finished (the process died while the server worked): never sent again
    store.begin_leaf("run:1", path=leaf.path_str, digest=arguments_digest(leaf.path_str,
                                                                         arguments))
    interrupted = executor.execute(leaf, arguments, "run:1")
    assert interrupted.is_replayed and "not run again" in (interrupted.error or "")
    # an isolated executor still forwards MCP leaves in this process (it holds the sessions)
    isolated = ProcessExecutor(handlers, timeout_s=30.0)
    try:
        assert isolated.execute(leaf, arguments, "run:2").result["server"] == "Law"
    finally:
        isolated.close()
    assert len(wait_for_calls(law_calls, before + 2)) == before + 2  # run:0 and run:2 only
    store.close()


def test_tools_list_changed_reimports(shared_data: Path, tmp_path: Path) -> None:
    changed: list[str] = []
    catalog = seal_catalog(shared_data)
    config = parse_servers({"Grow": stdio_spec(catalog, "Law", tmp_path / "grow.jsonl",
                                               "--grow-after", "1")})
    conns = McpConnections(on_tools_changed=changed.append)
    conns.add(config[0])
    try:
        tools = conns.list_tools("Grow")
        document = refreshed_catalog(
            {"name": "g", "mcp_servers": {"Grow": config[0].to_dict()},
             "mcp_import": ImportOptions(max_flat=100).to_dict()}, {"Grow": tools},
            embedder=None)
        assert conns.call_tool("Grow", tools[0]["name"], {}).is_error is False
        wait_for_calls(tmp_path / "grow.jsonl", 1)
        for _ in range(100):
            if changed:
                break
            time.sleep(0.05)
        assert changed == ["Grow"]
        rebuilt = refreshed_catalog(document, {"Grow": conns.list_tools("Grow")},
                                    embedder=None)
        names = {leaf.name for leaf in build_tree(rebuilt).leaves()}
        assert "added_tool" in names and len(names) == len(tools) + 1
    finally:
        conns.close()


@pytest.mark.parametrize(("data", "message"), [
    ({}, "expected a non-empty object of MCP servers"),
    ({"a": {"command": "x", "url": "http://h"}}, "exactly one of 'command'"),
    ({"a": {"url": "ftp://h"}}, "must be an http(s) URL"),
    ({"a": {"command": "x", "argz": []}}, "unknown keys ['argz']"),
    ({"a": {"command": "x", "args": "-v"}}, "'args' must be a list of strings"),
    ({"1a": {"command": "x"}}, "must start with a letter"),
    ({"a": {"url": "http://h", "timeout_s": 0}}, "'timeout_s' must be a positive number"),
])
def test_bad_server_config_says_what_was_expected(data: Any, message: str) -> None:
    with pytest.raises(McpConfigError) as raised:
        parse_servers(data)
    assert message in str(raised.value)


def test_a_config_round_trips_through_the_catalog_field() -> None:
    data = {"a": {"command": "python", "args": ["s.py"], "env": {"K": "v"}},
            "b": {"url": "https://h/mcp", "headers": {"Authorization": "Bearer t"},
                  "timeout_s": 5}}
    parsed = parse_servers(data)
    assert {c.name: c.to_dict() for c in parsed} == data
    assert json.loads(json.dumps(data)) == data


def _leaf(tree: CapabilityTree, tool: str) -> Any:
    return next(leaf for leaf in tree.leaves() if leaf.metadata["mcp"]["tool"] == tool)
