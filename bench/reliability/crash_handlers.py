"""Leaf handlers for the crash harness: each execution is appended to a log file, so the harness
can count how often every call really ran.

The server imports them by the catalog's import paths (`stackroute.bench.reliability.crash_handlers:
send_transfer`), allowed by the operator's `allowed_handler_modules`. The log file is named by
`$STACKROUTE_CRASH_LOG`, read at each call: the harness sets it for the server it starts.

Handlers see only their arguments, never the call id (the runtime passes none), so the
harness makes each call's arguments unique within a run (the job tag) and maps log lines to
call ids through the `leaf_pending` events of the traces.

Each handler sleeps a little before and after its write, so a kill at a random moment can land
inside a handler, on either side of the effect.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

LOG_ENV = "STACKROUTE_CRASH_LOG"
SLEEP_S = 0.004  # before and after the write


def _recording(leaf: str) -> Callable[..., dict[str, Any]]:
    def handler(**arguments: Any) -> dict[str, Any]:
        time.sleep(SLEEP_S)
        line = json.dumps({"leaf": leaf, "arguments": arguments, "pid": os.getpid()},
                          sort_keys=True) + "\n"
        # One O_APPEND write: a line is whole or absent even if the process dies right here
        # (the write is in the kernel once it returns; a SIGKILL cannot undo it).
        fd = os.open(os.environ[LOG_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
        time.sleep(SLEEP_S)
        return result_of(leaf, arguments)

    handler.__name__ = leaf
    return handler


def result_of(leaf: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """What a handler returns for these arguments (the reference run computes it too)."""
    return {"ok": True, "leaf": leaf, **arguments}


send_transfer = _recording("send_transfer")
check_limit = _recording("check_limit")
send_wire = _recording("send_wire")
fx_quote = _recording("fx_quote")
freeze_card = _recording("freeze_card")
card_status = _recording("card_status")
update_address = _recording("update_address")
statement = _recording("statement")


def read_log(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The executions recorded so far, in order."""
    try:
        with open(path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []
