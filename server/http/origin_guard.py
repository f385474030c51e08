"""What a web page the operator visits may make their browser do to this server: nothing.

Two checks, before any route or body read:

- **Host allowlist** (DNS rebinding): a page on `evil.example` rebinds its name to 127.0.0.1;
  the browser then treats the server as that page's own origin and sends `Host:
  evil.example:8000`. Only the loopback names, the host the server binds and the operator's
  `allowed_hosts` are served; any other `Host` is refused (`403`). A server bound to every
  interface (`0.0.0.0`) cannot know the names it is reached by: it serves any `Host` unless
  `allowed_hosts` lists them.
- **Origin and content type** (cross-site requests): a browser sends `Origin` on every
  cross-origin request and on same-origin ones that change state. A request whose `Origin`
  is neither the server's own (the `Host` it was sent to) nor in `allowed_origins` is `403`.
  A state-changing request (POST, PUT, PATCH, DELETE) must carry a JSON (or, for catalogs,
  YAML) body or none at all: the content types a page may send cross-site without a
  preflight (`text/plain`, forms, multipart) are `415`, so even a browser that sent no
  `Origin` cannot upload a catalog or start a session.

>>> host_name("LOCALHOST:8000"), host_name("[::1]:8000"), host_name("10.0.0.5")
('localhost', '::1', '10.0.0.5')
>>> HostPolicy.from_settings(bind_host="127.0.0.1", allowed_hosts=()).allows("evil.example")
False
>>> HostPolicy.from_settings(bind_host="0.0.0.0", allowed_hosts=()).allows("evil.example")
True
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from stackroute.server.http.api_catalogs import YAML_MEDIA_TYPES
from stackroute.server.http.asgi_middleware import HttpMiddleware, refuse
from starlette.types import ASGIApp, Receive, Scope, Send

LOOPBACK_HOSTS = frozenset({"localhost", "ip6-localhost", "127.0.0.1", "::1"})
WILDCARD_BINDS = frozenset({"0.0.0.0", "::", ""})
ANY_HOST = "*"
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# The bodies this API reads: JSON everywhere, YAML for catalog uploads.
ACCEPTED_MEDIA = "application/json (or application/yaml for a catalog)"


def host_name(host_header: str) -> str:
    """The name of a `Host` header, lowercased, without its port or IPv6 brackets."""
    text = host_header.strip().lower()
    if text.startswith("["):
        return text[1:text.find("]")] if "]" in text else text[1:]
    return text.rsplit(":", 1)[0] if text.count(":") == 1 else text


@dataclass(frozen=True)
class HostPolicy:
    """Which `Host` names are served (`names`; None: any) and which browser origins, besides
    the server's own, may call it (`origins`, as `scheme://host[:port]`)."""

    names: frozenset[str] | None
    origins: frozenset[str]

    @classmethod
    def from_settings(cls, *, bind_host: str, allowed_hosts: Iterable[str],
                      allowed_origins: Iterable[str] = ()) -> HostPolicy:
        extra = {host_name(h) if h != ANY_HOST else h for h in allowed_hosts}
        origins = frozenset(o.strip().rstrip("/").lower() for o in allowed_origins)
        if ANY_HOST in extra or (not extra and bind_host.strip("[]") in WILDCARD_BINDS):
            return cls(None, origins)
        return cls(frozenset(LOOPBACK_HOSTS | {host_name(bind_host)} | extra), origins)

    def allows(self, host: str) -> bool:
        return self.names is None or host_name(host) in self.names

    def allows_origin(self, origin: str, host: str) -> bool:
        """Same origin (the `Origin`'s host and port are the `Host` the request was sent to),
        or one the operator listed."""
        normalized = origin.strip().rstrip("/").lower()
        if normalized in self.origins:
            return True
        parts = urlsplit(normalized)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return False  # "null" (a sandboxed frame, a file), or not an origin at all
        return _with_port(parts.netloc, parts.scheme) == _with_port(host.lower(), parts.scheme)


def media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def is_accepted_media(media: str) -> bool:
    return media == "application/json" or media.endswith("+json") or media in YAML_MEDIA_TYPES


class OriginGuardMiddleware(HttpMiddleware):
    """Refuse a request whose `Host`, `Origin` or body type a browser page could forge (see
    the module), before the app or the body read runs."""

    def __init__(self, app: ASGIApp, *, policy: HostPolicy) -> None:
        self.app = app
        self.policy = policy

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        refusal = self.refusal(scope)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        status, code, message = refusal
        await refuse(scope, receive, send, status, code=code, message=message,
                     headers={"Connection": "close"})

    def refusal(self, scope: Scope) -> tuple[int, str, str] | None:
        headers = _headers(scope)
        host = headers.get("host", "")
        if host and not self.policy.allows(host):
            names = ", ".join(sorted(self.policy.names or ()))
            return 403, "host_not_allowed", (
                f"Host {host[:200]!r} is not served here (DNS rebinding guard): expected one "
                f"of {names}; add the name to allowed_hosts (--allowed-host) when a proxy or "
                "DNS name fronts this server")
        origin = headers.get("origin")
        if origin is not None and not self.policy.allows_origin(origin, host):
            return 403, "origin_not_allowed", (
                f"Origin {origin[:200]!r} may not call this server: expected this server's "
                f"own origin (Host {host[:200]!r}) or one listed in allowed_origins "
                "(--allowed-origin)")
        if scope["method"] in STATE_CHANGING:
            content_type = headers.get("content-type")
            has_body = headers.get("transfer-encoding") is not None or \
                headers.get("content-length", "0").strip() not in ("", "0")
            if content_type is None:
                if has_body:
                    return 415, "unsupported_media_type", (
                        f"{scope['method']} {scope['path'][:200]} needs a Content-Type: "
                        f"expected {ACCEPTED_MEDIA}; got none")
            elif not is_accepted_media(media_type(content_type)):
                return 415, "unsupported_media_type", (
                    f"{scope['method']} {scope['path'][:200]} takes {ACCEPTED_MEDIA}; got "
                    f"{content_type[:100]!r} (a type a web page may send cross-site)")
        return None


def _headers(scope: Scope) -> dict[str, str]:
    """The headers this guard reads (the first of each), decoded as HTTP does (latin-1)."""
    wanted = {b"host", b"origin", b"content-type", b"content-length", b"transfer-encoding"}
    out: dict[str, str] = {}
    for name, value in scope.get("headers", []):
        if name in wanted:
            out.setdefault(name.decode("latin-1"), bytes(value).decode("latin-1"))
    return out


def _with_port(netloc: str, scheme: str) -> str:
    """`host:port` with the scheme's default port made explicit (`localhost` → `:80`)."""
    default = "443" if scheme == "https" else "80"
    if netloc.startswith("["):
        return netloc if "]:" in netloc else f"{netloc}:{default}"
    return netloc if ":" in netloc else f"{netloc}:{default}"
