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
        """The URL without its password (for logs)."""
        return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", self.target)


def parse_store_url(value: str) -> StoreUrl:
    """The backend and target a `db` setting names; `StoreUrlError` for one it cannot use."""
    text = value.strip()
    if not text:
        raise StoreUrlError(f"db is empty; {_EXPECTED}")
    match = _SCHEME.match(text)
    if match is None:
        return StoreUrl("sqlite", text)
    scheme, rest = match.group(1).lower(), match.group(2)
    if scheme == "sqlite":
        if not rest.startswith("///") or len(rest) == 3:
            raise StoreUrlError(f"db {value!r} is not a SQLite URL this server can use: it "
                                "must be 'sqlite:///' followed by the file's path; "
                                f"{_EXPECTED}")
        return StoreUrl("sqlite", rest[3:])
    if scheme in POSTGRES_SCHEMES:
        if not rest.startswith("//"):
            raise StoreUrlError(f"db {value!r} is not a database URL this server can use: a "
                                "PostgreSQL URL starts with 'postgresql://' (two slashes, "
                                f"then host); {_EXPECTED}")
        return StoreUrl("postgresql", "postgresql:" + rest)
    raise StoreUrlError(f"db {value!r} has the scheme {scheme!r}, which this server does not "
                        f"serve (known: sqlite, {', '.join(POSTGRES_SCHEMES)}); {_EXPECTED}")


def open_store(db: str, *, lease_s: float | None = None) -> StoreBackend:
    """The store the `db` setting names, opened (migrated, for PostgreSQL)."""
    url = parse_store_url(db)
    if url.backend == "postgresql":
        from stackroute.server.service.pg_store import DEFAULT_LEASE_S, PgSessionStore

        return PgSessionStore(url.target, lease_s=lease_s or DEFAULT_LEASE_S)
    from stackroute.server.service.store import SessionStore

    return SessionStore(url.target)
