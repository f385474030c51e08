"""Text the session store cannot keep is refused at the HTTP edge, with a 400 saying where.

PostgreSQL's `text` and `jsonb` cannot hold U+0000 (a NUL in a task was an unhandled 500
there), and no UTF-8 store can hold an unpaired surrogate (`"\\ud800"` is valid JSON but no
character). Both arrive only as JSON escapes, so a body is parsed (once more) only when its
bytes hold such an escape; the path and query are checked for a NUL too.

>>> unstorable_at({"task": "pay\\u0000", "n": [1, "ok"]})
('task', 'U+0000 (NUL)')
>>> unstorable_at({"a": ["x", "\\ud800"]})
('a.1', 'U+D800 (an unpaired surrogate)')
>>> unstorable_at({"fine": "héllo 👋"}) is None
True
"""

from __future__ import annotations

import json
import re
from typing import Any

from stackroute.server.http.asgi_middleware import HttpMiddleware, refuse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
# The JSON escapes that can make one (raw NULs and surrogates are invalid JSON or UTF-8 anyway).
_ESCAPE = re.compile(rb"\\u(?:0000|[dD][89a-fA-F][0-9a-fA-F]{2})")
_MAX_DEPTH = 256  # deeper bodies are the app's to refuse (its own nesting limits)
EXPECTED = "text without U+0000 (NUL) or unpaired surrogates, which no store can keep"


def unstorable_at(value: Any, where: str = "") -> tuple[str, str] | None:
    """The first place (a dotted field path; '' for the whole value) where `value` holds
    text a store cannot keep, and what it holds there; None when it has none."""
    stack: list[tuple[Any, str, int]] = [(value, where, 0)]
    while stack:
        item, at, depth = stack.pop()
        if isinstance(item, str):
            found = _UNSTORABLE.search(item)
            if found is not None:
                return at, _describe(found.group())
        elif depth < _MAX_DEPTH and isinstance(item, dict):
            for key, child in reversed(item.items()):
                path = f"{at}.{key}" if at else str(key)
                found_key = _UNSTORABLE.search(str(key))
                if found_key is not None:
                    return path, _describe(found_key.group()) + " in a field name"
                stack.append((child, path, depth + 1))
        elif depth < _MAX_DEPTH and isinstance(item, list):
            stack.extend((child, f"{at}.{i}" if at else str(i), depth + 1)
                         for i, child in reversed(list(enumerate(item))))
    return None


def _describe(char: str) -> str:
    code = f"U+{ord(char):04X}"
    return f"{code} (NUL)" if char == "\x00" else f"{code} (an unpaired surrogate)"


class StorableTextMiddleware(HttpMiddleware):
    """400 for a NUL in the path or query, or unstorable text in a JSON body, before any
    route runs. Sits inside the body limit, which hands it the whole body in one message."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if "\x00" in scope["path"] or b"%00" in scope.get("query_string", b"").lower():
            where = "path" if "\x00" in scope["path"] else "query string"
            await self._refuse(scope, receive, send, f"the {where}", "U+0000 (NUL)", None)
            return
        if scope["method"] in {"GET", "HEAD", "OPTIONS"}:
            await self.app(scope, receive, send)
            return
        first = await receive()
        body = first.get("body", b"") if first["type"] == "http.request" else b""
        if first.get("more_body", False) or not _ESCAPE.search(body):
            await self.app(scope, _replay(first, receive), send)
            return
        try:
            found = unstorable_at(json.loads(body))
        except (ValueError, RecursionError):
            found = None  # not JSON (or too deep): the route says what it expected
        if found is None:
            await self.app(scope, _replay(first, receive), send)
            return
        at, what = found
        await self._refuse(scope, receive, send, f"body field {at!r}" if at else "the body",
                           what, at or None)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, where: str,
                      what: str, param: str | None) -> None:
        await refuse(scope, receive, send, 400, code="unstorable_text", param=param,
                     message=f"expected {EXPECTED}; got {what} in {where}")


def _replay(first: Message, receive: Receive) -> Receive:
    is_replayed = False

    async def replay() -> Message:
        nonlocal is_replayed
        if not is_replayed:
            is_replayed = True
            return first
        return await receive()

    return replay
