"""The session store seam: what the service calls on a database, whichever one it is.

Two stores satisfy it: `SessionStore` (SQLite, embedded, one process) and `PgSessionStore`
(PostgreSQL, shared by several instances). The lease methods are what lets several instances
share sessions: exactly one instance advances a session at a time, by holding its lease, and
every write it makes for the session carries the token its claim returned, so an instance
whose lease was taken over (it stalled past the expiry, or a client cancelled the session
through another instance) cannot write any more. SQLite serves one process, so there a lease
is always granted and a token is never stale.

A store classifies its own errors (`store_records`): `StoreBusyError` is retryable,
`LeaseLostError` means another instance holds the session, `DuplicateRecordError` a key
already stored; the service never imports a database driver. Methods a store has beyond these
(`lease_token`, `count_active_sessions`, SQLite's `pragma`) are for tests and tools.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from stackroute.runtime.governance import RunStatus
from stackroute.runtime.state import RunState
from stackroute.runtime.trace import TraceEvent
from stackroute.server.service.store_records import (
    CatalogRecord,
    Claim,
    LeafExecution,
    SessionRecord,
    SessionRow,
)


@runtime_checkable
class Listening(Protocol):
    def close(self) -> None: ...


@runtime_checkable
class StoreBackend(Protocol):
    """A session store. Every write is one transaction; methods are thread-safe."""

    is_shared: bool  # other processes use it too: leases are real, sessions are claimed
    lease_s: float  # how long a claim lasts without renewal (0: leases are not used)

    def close(self) -> None: ...

    # catalogs
    def put_catalog(self, record: CatalogRecord) -> bool: ...
    def catalogs(self) -> list[CatalogRecord]: ...
    def catalog(self, catalog_id: str) -> CatalogRecord | None: ...
    def has_catalog(self, catalog_id: str) -> bool: ...
    def delete_catalog(self, catalog_id: str) -> bool: ...  # CatalogInUseError if in use

    # sessions
    def create_session(self, session_id: str, *, catalog_id: str, state: RunState,
                       is_flat: bool, is_auto_approve: bool,
                       owner: str | None = None) -> int: ...  # CatalogGoneError
    def save_step(self, session_id: str, state: RunState, events: Sequence[TraceEvent], *,
                  token: int | None = None) -> None: ...
    def session_row(self, session_id: str) -> SessionRow | None: ...
    def load_session(self, session_id: str) -> SessionRecord | None: ...
    def list_sessions(self, *, status: RunStatus | None = None, catalog_id: str | None = None,
                      limit: int = 100, offset: int = 0) -> list[SessionRow]: ...
    def count_by_status(self) -> dict[str, int]: ...
    def transitions(self, session_id: str, *, after_seq: int = -1) -> list[dict[str, Any]]: ...

    # leases (one worker per session across instances)
    def claim_session(self, session_id: str, owner: str, *, lease_s: float,
                      is_forced: bool = False) -> int | None: ...
    def claim_expired(self, owner: str, *, lease_s: float, limit: int) -> list[Claim]: ...
    def renew_leases(self, owner: str, *, lease_s: float) -> int: ...
    def release_session(self, session_id: str, token: int, *,
                        retry_after_s: float = 0.0) -> None: ...

    # leaf executions (at most once per call id)
    def leaf_execution(self, call_id: str) -> LeafExecution | None: ...
    def begin_leaf(self, call_id: str, *, path: str, digest: str,
                   session_id: str | None = None, token: int | None = None) -> None: ...
    def finish_leaf(self, call_id: str, *, result: Any, error: str | None) -> None: ...

    # events from other processes (None: this store has none to offer; poll instead)
    def listen(self, on_session: Callable[[str], None]) -> Listening | None: ...
