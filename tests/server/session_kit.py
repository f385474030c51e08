"""Helpers for the session and routing-API tests: a bank catalog, handlers that log every
execution to a file, and a way to wait for a session. The engine that follows a plan over it
is doubles.PlanEngine (re-exported here for tests that import it from this kit)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from doubles import SEND_ARGUMENTS, SEND_PLAN, PlanEngine
from stackroute.runtime.governance import RunStatus
from stackroute.runtime.handlers import HandlerTable
from stackroute.server.service.store import SessionStore

__all__ = ["BANK_CATALOG", "SEND_ARGUMENTS", "SEND_MONEY_SCHEMA", "SEND_PLAN", "PlanEngine",
           "executions", "logging_handlers", "wait_for_status"]

SEND_MONEY_SCHEMA = {
    "type": "object",
    "properties": {"payee": {"type": "string"}, "amount": {"type": "number"}},
    "required": ["payee", "amount"],
    "additionalProperties": False,
}

# bank
# ├── payments            (router)
# │   ├── send_money      (leaf, sensitive)
# │   └── balance         (leaf, no arguments)
# └── weather             (leaf, city: string)
BANK_CATALOG: dict[str, Any] = {
    "name": "Bank Tools",
    "description": "Banking tools",
    "children": [
        {"name": "payments", "description": "Send, receive and track payments.",
         "children": [
             {"name": "send_money", "description": "Send money to a contact.",
              "parameters": SEND_MONEY_SCHEMA, "sensitive": True},
             {"name": "balance", "description": "Show the balance."},
         ]},
        {"name": "weather", "description": "Weather for a city.",
         "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                        "required": ["city"]}},
    ],
}


def logging_handlers(log_path: Path) -> HandlerTable:
    """Handlers that append one JSON line per execution to `log_path`."""

    def record(name: str) -> Callable[..., Any]:
        def handler(**arguments: Any) -> dict[str, Any]:
            with open(log_path, "a", encoding="utf-8") as f:
                f.write(json.dumps({"leaf": name, "arguments": arguments}) + "\n")
            return {"ok": True, "leaf": name, **arguments}
        return handler

    return HandlerTable({"payments/send_money": record("send_money"),
                         "payments/balance": record("balance"),
                         "weather": record("weather")})


def executions(log_path: Path) -> list[dict[str, Any]]:
    if not log_path.exists():
        return []
    return [json.loads(line) for line in log_path.read_text().splitlines() if line.strip()]


def wait_for_status(store: SessionStore, session_id: str,
                    statuses: Sequence[RunStatus] = (), *, timeout_s: float = 10.0,
                    ) -> RunStatus:
    """Poll the store until the session's status is one of `statuses` (default: anything but
    running); fail after `timeout_s`."""
    wanted = set(statuses) or {s for s in RunStatus if s is not RunStatus.RUNNING}
    deadline = time.monotonic() + timeout_s
    while True:
        row = store.session_row(session_id)
        if row is not None and row.status in wanted:
            return row.status
        if time.monotonic() > deadline:
            raise TimeoutError(f"session {session_id} is {row and row.status}, not one of "
                               f"{sorted(wanted)}")
        time.sleep(0.01)
