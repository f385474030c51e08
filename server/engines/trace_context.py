"""The W3C trace context an engine forwards on its own requests (the remote engine's
`traceparent` header), without knowing anything of OpenTelemetry.

The HTTP layer sets `TRACEPARENT` for the duration of a request (`http/middleware.py`); it is a
context variable, so it follows the request into the worker thread that runs the engine call
(anyio copies the context). A session's worker thread starts with no context at all, so
`service/sessions.py` sets it around each step, to the span of the frame the step runs in.
Nothing set: no header.

>>> token = TRACEPARENT.set("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
>>> trace_headers()
{'traceparent': '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'}
>>> TRACEPARENT.reset(token)
>>> trace_headers()
{}
"""

from __future__ import annotations

import re
from contextvars import ContextVar

TRACEPARENT: ContextVar[str | None] = ContextVar("stackroute_traceparent", default=None)

# version-trace_id-parent_id-flags, lower-case hex; all-zero ids are invalid (W3C Trace Context)
_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$")


def is_valid_traceparent(value: str) -> bool:
    return _TRACEPARENT.match(value) is not None and not value.startswith("ff")


def trace_headers() -> dict[str, str]:
    """The headers that carry the current trace context to an upstream (none when unset)."""
    value = TRACEPARENT.get()
    return {"traceparent": value} if value else {}
