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
