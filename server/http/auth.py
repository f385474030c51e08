"""Optional API key: `Authorization: Bearer <key>` on every API route.

`ApiKeyMiddleware` checks it before anything reads the request's body, so a client without
the key cannot make the server hold an upload (20 slow 7 MiB uploads held 140 MiB when the
check ran after the body was read); the `ApiKeyAuth` dependency on the routers checks it too
and puts the scheme in the OpenAPI schema.

The key is compared in constant time (`hmac.compare_digest`) and is never logged: the access
log records method, path and status only, and settings hold it as a `SecretStr`.

`/healthz` and `/readyz` stay open: load balancers and orchestrators probe them without
credentials, and they reveal only "up" and "ready". An open path takes no body: one is refused
before it is read, so slow uploads from clients without the key hold no connection slot.
`/metrics` is open by default too, because Prometheus scrapers usually carry no token and it
holds counts and latencies only, never a prompt, a catalog, a key or the model's path; set
`protect_metrics` to put it behind the key as well.
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import SecretStr
from stackroute.server.http.asgi_middleware import HttpMiddleware, refuse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

# Paths open without the key (see the module docstring); /metrics joins them unless
# `protect_metrics` is set.
PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/docs", "/docs/oauth2-redirect", "/redoc",
                          "/openapi.json"})

_BEARER = HTTPBearer(auto_error=False, scheme_name="apiKey",
                     description="the server's API key (--api-key / STACKROUTE_API_KEY)")


class _KeyCheck:
    def __init__(self, api_key: SecretStr) -> None:
        self._expected = api_key.get_secret_value().encode()

    def refusal(self, given: bytes) -> str | None:
        """Why `given` (the bearer token, b"" when none was sent) is refused, or None."""
        # compare_digest on bytes: str arguments must be ASCII, and a header need not be.
        if not given:
            return "missing API key"
        if not hmac.compare_digest(given, self._expected):
            return "invalid API key"
        return None


class ApiKeyAuth(_KeyCheck):
    """A FastAPI dependency that accepts only the configured key; adds the OpenAPI scheme."""

    async def __call__(
        self, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_BEARER)],
    ) -> None:
        reason = self.refusal(credentials.credentials.encode()
                              if credentials is not None else b"")
        if reason is not None:
            raise StarletteHTTPException(
                401, detail=f"{reason}: send the header 'Authorization: Bearer <key>'",
                headers={"WWW-Authenticate": "Bearer"})


def bearer_token(header: bytes | None) -> bytes:
    """The token of an `Authorization: Bearer <token>` header; b"" for any other header."""
    scheme, _, token = (header or b"").partition(b" ")
    return token.strip() if scheme.lower() == b"bearer" else b""


class ApiKeyMiddleware(_KeyCheck, HttpMiddleware):
    """Refuse a request without the key (401) before the app, or any body read, runs."""

    def __init__(self, app: ASGIApp, *, api_key: SecretStr,
                 public_paths: frozenset[str] = PUBLIC_PATHS) -> None:
        super().__init__(api_key)
        self.app = app
        self.public_paths = public_paths

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["path"] in self.public_paths:
            # Open paths take no body: one is refused before it is read, so a client without
            # the key cannot hold a connection slot with a slow upload (two slow 8 MiB POSTs
            # to /healthz made keyed requests 503 when the body limit read them first).
            declared = _declared_body(scope)
            if declared is None:
                await self.app(scope, receive, send)
                return
            await refuse(scope, receive, send, 413, code="body_not_allowed",
                         message=f"{scope['path'][:200]} takes no request body; got {declared}",
                         headers={"Connection": "close"})
            return
        header = next((bytes(v) for k, v in scope.get("headers", [])
                       if k == b"authorization"), None)
        reason = self.refusal(bearer_token(header))
        if reason is None:
            await self.app(scope, receive, send)
            return
        await refuse(scope, receive, send, 401, code="invalid_api_key",
                     message=f"{reason}: send the header 'Authorization: Bearer <key>'",
                     headers={"WWW-Authenticate": "Bearer", "Connection": "close"})


def _declared_body(scope: Scope) -> str | None:
    """What body a request says it sends ("N bytes", "a chunked body"), or None for none."""
    for name, value in scope.get("headers", []):
        if name == b"transfer-encoding":
            return "a chunked body"
        if name == b"content-length" and bytes(value).strip() not in (b"", b"0"):
            return f"{bytes(value).decode('latin-1')[:20]} bytes"
    return None
