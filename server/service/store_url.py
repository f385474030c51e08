"""Which database the service uses, from the `db` setting: a URL, or a bare SQLite path.

    sqlite:////var/lib/stackroute.db       SQLite, absolute path (as SQLAlchemy: 3 slashes,
    sqlite:///stackroute.db                then the path, which is relative unless it starts
                                           with a fourth slash)
    ./stackroute.db                        SQLite (a bare path; the default)
    postgresql://user:pw@host:5432/name    PostgreSQL (also postgres://, postgresql+psycopg://)

Anything else with a scheme (`mysql://…`, or a mangled `postgresql:/host/db` with one slash)
is refused with the forms above, instead of becoming a SQLite file of that odd name:

>>> parse_store_url("sqlite:////tmp/s.db")
StoreUrl(backend='sqlite', target='/tmp/s.db')
>>> parse_store_url("./s.db")
StoreUrl(backend='sqlite', target='./s.db')
>>> parse_store_url("postgres://u@127.0.0.1:5432/db").backend
'postgresql'
>>> try:
...     parse_store_url("postgresql:/u@127.0.0.1/db")
... except StoreUrlError as e:
...     print(str(e)[:78])
db 'postgresql:/u@127.0.0.1/db' is not a database URL this server can use: a P
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from stackroute.runtime.errors import InputError
from stackroute.server.redaction import redact_secrets, redact_url

if TYPE_CHECKING:
    from stackroute.server.service.store_protocol import StoreBackend

Backend = Literal["sqlite", "postgresql"]
POSTGRES_SCHEMES = ("postgresql", "postgres", "postgresql+psycopg")
_EXPECTED = "expected 'sqlite:///PATH', a file path, or 'postgresql://USER@HOST:PORT/DBNAME'"
# A scheme: letters then `:`; a Windows drive (`C:\…`, one letter) is a path, not a scheme.
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):(.*)$", re.DOTALL)


class StoreUrlError(InputError):
    """The `db` setting names a database this server cannot open."""

    code = "bad_store_url"


@dataclass(frozen=True)
class StoreUrl:
    backend: Backend
    target: str  # the SQLite path, or the PostgreSQL conninfo URL as given

    def redacted(self) -> str:
        """The URL without its password (for logs): `server/redaction.py`."""
        return redact_url(self.target)


def parse_store_url(value: str) -> StoreUrl:
    """The backend and target a `db` setting names; `StoreUrlError` for one it cannot use."""
    text = value.strip()
    shown = redact_url(value)  # what an error may quote: never the password
    if not text:
        raise StoreUrlError(f"db is empty; {_EXPECTED}")
    match = _SCHEME.match(text)
    if match is None:
        return StoreUrl("sqlite", text)
    scheme, rest = match.group(1).lower(), match.group(2)
    if scheme == "sqlite":
        if not rest.startswith("///") or len(rest) == 3:
            raise StoreUrlError(f"db {shown!r} is not a SQLite URL this server can use: it "
                                "must be 'sqlite:///' followed by the file's path; "
                                f"{_EXPECTED}")
        return StoreUrl("sqlite", rest[3:])
    if scheme in POSTGRES_SCHEMES:
        if not rest.startswith("//"):
            raise StoreUrlError(f"db {shown!r} is not a database URL this server can use: a "
                                "PostgreSQL URL starts with 'postgresql://' (two slashes, "
                                f"then host); {_EXPECTED}")
        _check_authority(rest[2:], shown)
        return StoreUrl("postgresql", "postgresql:" + rest)
    raise StoreUrlError(f"db {shown!r} has the scheme {scheme!r}, which this server does not "
                        f"serve (known: sqlite, {', '.join(POSTGRES_SCHEMES)}); {_EXPECTED}")


def _check_authority(rest: str, shown: str) -> None:
    """libpq splits `user:p@ss@host` at the first `@` (then reports the host `ss@host`, a
    piece of the password) and quotes a password with a space in its error: both refused
    here, with the URL redacted (a URL with a space is not quoted at all)."""
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    if authority.count("@") > 1:
        raise StoreUrlError(f"db {shown!r}: the user or password holds '@'; percent-encode "
                            "it as %40 (postgresql://USER:PASSWORD@HOST:PORT/DBNAME)")
    if re.search(r"\s", rest):
        raise StoreUrlError("db: a PostgreSQL URL cannot hold spaces (not quoted here: "
                            "one may be in its password); percent-encode them as %20")


def open_store(db: str, *, lease_s: float | None = None) -> StoreBackend:
    """The store the `db` setting names, opened (migrated, for PostgreSQL). An error that
    quotes the URL (psycopg's do: `invalid dsn: ... "postgresql://u:pw@..."`) is raised again
    with the password redacted, and without the original chained to it (a traceback prints
    the chain)."""
    url = parse_store_url(db)
    if url.backend == "postgresql":
        from stackroute.server.service.pg_store import DEFAULT_LEASE_S, PgSessionStore
        from stackroute.server.service.store import StoreUnavailableError

        try:
            return PgSessionStore(url.target, lease_s=lease_s or DEFAULT_LEASE_S)
        except StoreUnavailableError as e:
            raise StoreUnavailableError(redact_secrets(str(e))) from None
    from stackroute.server.service.store import SessionStore

    return SessionStore(url.target)
