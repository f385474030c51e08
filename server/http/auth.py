"""Optional API key: `Authorization: Bearer <key>` on every API route.

The key is compared in constant time (`hmac.compare_digest`) and is never logged: the access
log records method, path and status only, and settings hold it as a `SecretStr`.

`/healthz` and `/readyz` stay open: load balancers and orchestrators probe them without
credentials, and they reveal only "up" and "ready". `/metrics` is open by default too, because
Prometheus scrapers usually carry no token and it holds counts and latencies only, never a
prompt, a catalog or a key; set `protect_metrics` to put it behind the key as well.
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import SecretStr
from starlette.exceptions import HTTPException as StarletteHTTPException

_BEARER = HTTPBearer(auto_error=False, scheme_name="apiKey",
                     description="the server's API key (--api-key / STACKROUTE_API_KEY)")


class ApiKeyAuth:
    """A FastAPI dependency that accepts only the configured key; adds the OpenAPI scheme."""

    def __init__(self, api_key: SecretStr) -> None:
        self._expected = api_key.get_secret_value().encode()

    async def __call__(
        self, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_BEARER)],
    ) -> None:
        given = credentials.credentials.encode() if credentials is not None else b""
        # compare_digest on bytes: str arguments must be ASCII, and a header need not be.
        if not given or not hmac.compare_digest(given, self._expected):
            reason = "missing API key" if not given else "invalid API key"
            raise StarletteHTTPException(
                401, detail=f"{reason}: send the header 'Authorization: Bearer <key>'",
                headers={"WWW-Authenticate": "Bearer"})
