"""What the service's pure ASGI middlewares share: they act on HTTP requests only (a lifespan
or websocket scope goes straight to the app), and refuse a request with the error body
(`errors.py`) before the app runs, carrying the request's id when `RequestContextMiddleware`
has given it one."""

from __future__ import annotations

from stackroute.server.http.errors import error_response
from starlette.types import ASGIApp, Receive, Scope, Send


class HttpMiddleware:
    """A pure ASGI middleware over `app` (its subclass sets it) that implements
    `handle`: called for every HTTP request, never for another scope type."""

    app: ASGIApp

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.handle(scope, receive, send)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        raise NotImplementedError


async def refuse(scope: Scope, receive: Receive, send: Send, status: int, *, code: str,
                 message: str, param: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
    """Answer the request with an error `status` instead of the app."""
    response = error_response(status, code=code, message=message, param=param,
                              request_id=scope.get("state", {}).get("request_id"),
                              headers=headers)
    await response(scope, receive, send)
