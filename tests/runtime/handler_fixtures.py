"""Handlers the handler tests bind by import path (`handler_fixtures:add`)."""

from __future__ import annotations

import threading
from typing import Any

RELEASE = threading.Event()
NOT_CALLABLE = 3


def add(a: int, b: int) -> int:
    return a + b


def boom(**_: Any) -> None:
    raise ValueError("bad input for boom")


def upstream_timeout(**_: Any) -> None:
    raise TimeoutError("upstream service timed out")


def wait_for_release(**_: Any) -> str:
    RELEASE.wait(timeout=5.0)
    return "released"


def odd_result() -> Any:
    return {"pair": (1, 2), "tags": {"only"}, 3: "int key"}


def whoami(**arguments: Any) -> dict[str, Any]:
    """Returns the call it serves, as a tool would pass the call id on as an idempotency key."""
    from stackroute.runtime.handlers import current_call

    call = current_call()
    return {"call_id": call.call_id, "leaf": call.leaf_path, "arguments": arguments}


def hang(**_: Any) -> None:
    """Never returns on its own (a tool stuck on a dead upstream)."""
    import time

    while True:
        time.sleep(0.05)


def hard_exit(**_: Any) -> None:
    import os

    os._exit(7)


def worker_pid(**_: Any) -> int:
    import os

    return os.getpid()


def allocate(megabytes: int) -> int:
    return len(bytearray(megabytes << 20))


def _made(label: str) -> Any:
    def handler(**arguments: Any) -> dict[str, Any]:
        return {"label": label, **arguments}

    return handler


made_by_factory = _made("factory")  # importable by path, not picklable by reference
