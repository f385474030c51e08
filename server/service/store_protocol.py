"""The session store seam: what the service needs from a database, whichever one it is.

Two stores satisfy it: `SessionStore` (SQLite, embedded, one process) and `PgSessionStore`
(PostgreSQL, shared by several instances). The lease methods are what lets several instances
share sessions: exactly one instance advances a session at a time, by holding its lease, and
every write it makes for the session carries the lease's fencing token, so an instance whose
lease was taken over (it stalled past the expiry, or a client cancelled the session through
another instance) cannot write any more. SQLite serves one process, so there a lease is
always granted and a token is never stale.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from stackroute.runtime.errors import StackrouteError
from stackroute.runtime.governance import RunStatus
from stackroute.runtime.state import RunState
from stackroute.runtime.trace import TraceEvent
from stackroute.server.service.store import (
    CatalogRecord,
    LeafExecution,
    SessionRecord,
    SessionRow,
)


class LeaseLostError(StackrouteError):
    """This instance no longer holds the session's lease (another took it over): whatever it
    was about to write for the session is not written, and it stops working on it."""


class StoreBusyError(StackrouteError):
    """The database cannot be reached or is busy for now; the write can be retried."""


class DuplicateRecordError(StackrouteError):
    """A row with this key is already stored (a trace seq, a leaf call id)."""


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
    def delete_catalog(self, catalog_id: str) -> bool: ...

    # sessions
    def create_session(self, session_id: str, *, catalog_id: str, state: RunState,
                       is_flat: bool, is_auto_approve: bool,
                       owner: str | None = None) -> int: ...
    def save_step(self, session_id: str, state: RunState, events: Sequence[TraceEvent], *,
                  token: int | None = None) -> None: ...
    def session_row(self, session_id: str) -> SessionRow | None: ...
    def load_session(self, session_id: str) -> SessionRecord | None: ...
    def list_sessions(self, *, status: RunStatus | None = None, catalog_id: str | None = None,
                      limit: int = 100, offset: int = 0) -> list[SessionRow]: ...
    def count_by_status(self) -> dict[str, int]: ...
    def count_active_sessions(self, catalog_id: str) -> int: ...
    def transitions(self, session_id: str, *, after_seq: int = -1) -> list[dict[str, Any]]: ...

    # leases (one worker per session across instances)
    def claim_session(self, session_id: str, owner: str, *, lease_s: float,
                      is_forced: bool = False) -> int | None: ...
    def claim_expired(self, owner: str, *, lease_s: float, limit: int) -> list[str]: ...
    def renew_leases(self, owner: str, *, lease_s: float) -> int: ...
    def release_session(self, session_id: str, token: int) -> None: ...
    def lease_token(self, session_id: str) -> int | None: ...

    # leaf executions (at most once per call id)
    def leaf_execution(self, call_id: str) -> LeafExecution | None: ...
    def begin_leaf(self, call_id: str, *, path: str, digest: str,
                   session_id: str | None = None, token: int | None = None) -> None: ...
    def finish_leaf(self, call_id: str, *, result: Any, error: str | None) -> None: ...

    # events from other processes (None: this store has none to offer; poll instead)
    def listen(self, on_session: Callable[[str], None]) -> Listening | None: ...
