"""Killing `stackroute mcp` between a call's begin record and its result does not send the
call twice: the restarted gateway meets the begun record and answers it instead of calling
the MCP server again (the server's call file counts what it received). Tier c: the gateway
process loads the embedded model, though no routing decision is the model's here."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from mcp_kit import GatewayClient, recorded_calls, seal_catalog, stdio_spec, wait_for_calls
from stackroute.server.mcp.config import parse_servers
from stackroute.server.mcp.importer import ImportOptions, import_servers

pytestmark = pytest.mark.model
SLOW_TOOL = "getBasketballScore"


def test_a_call_begun_before_a_crash_is_never_sent_again(shared_data: Path,
                                                         tmp_path: Path) -> None:
    calls = tmp_path / "sports.jsonl"
    servers = parse_servers({"Sports": stdio_spec(seal_catalog(shared_data), "Sports", calls,
                                                  "--slow", SLOW_TOOL, "--slow-s", "20")})
    document = import_servers(servers, name="tools", options=ImportOptions(max_flat=1000))
    catalog = tmp_path / "gateway.json"
    catalog.write_text(json.dumps(document))
    db = tmp_path / "gateway.db"
    args = ["mcp", str(catalog), "--mode", "discover", "--db", str(db)]
    path = f"Sports/{SLOW_TOOL}"

    first = GatewayClient(args)
    arguments = _required_arguments(first.call("describe_leaf", {"path": path}))
    request = {"path": path, "arguments": arguments, "call_id": "order-1"}
    outcome: dict[str, Any] = {}

    def call() -> None:
        try:
            outcome["answer"] = first.call("call_leaf", request)
        except Exception as e:  # the gateway dies under it
            outcome["error"] = e

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    assert len(wait_for_calls(calls, 1)) == 1  # the server has it, and is still working
    os.kill(_gateway_pid(db), signal.SIGKILL)
    caller.join(timeout=60)
    first.close()
    assert "answer" not in outcome  # the first gateway never answered

    second = GatewayClient(args)
    try:
        replay = second.call("call_leaf", request)
        fresh = second.call("call_leaf", {**request, "path": "Sports/getTeamStats",
                                          "arguments": _required_arguments(second.call(
                                              "describe_leaf",
                                              {"path": "Sports/getTeamStats"})),
                                          "call_id": "order-2"})
    finally:
        second.close()
    assert replay["status"] == "error" and replay.get("is_replayed") is True
    assert "not run again" in replay["error"]
    assert fresh["status"] == "done"  # the restarted gateway still forwards new calls
    time.sleep(0.5)
    sent = [c["tool"] for c in recorded_calls(calls)]
    assert sent == [SLOW_TOOL, "getTeamStats"]  # the interrupted call was sent once


def _gateway_pid(db: Path) -> int:
    """The `stackroute mcp` process this test started (its command line names our db)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if str(db).encode() in cmdline and b"mcp" in cmdline:
            return int(entry.name)
    raise AssertionError(f"no gateway process with --db {db}")


def _required_arguments(described: dict[str, Any]) -> dict[str, Any]:
    """A value of the right type for every required parameter."""
    schema = described["parameters"]
    samples = {"string": "Lakers", "integer": 1, "number": 1.5, "boolean": True,
               "array": [], "object": {}}
    return {name: samples.get(schema["properties"][name].get("type", "string"), "x")
            for name in schema.get("required", [])}
