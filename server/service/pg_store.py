"""PostgreSQL persistence for the service: the same records as the SQLite store, shared by
several `stackroute serve` instances.

Same contract as `store.SessionStore` (a state and exactly the trace that led to it, in one
transaction; a leaf call recorded as begun before its handler runs), plus the leases of
`store_protocol`: a session is advanced by the one instance holding its lease, every write
for it carries the lease's fencing token, and a write with a stale token is refused in the
same transaction that would have made it (`LeaseLostError`). Lease times are the database's
clock (`clock_timestamp()`), so instances' clocks need not agree.

Every saved transition also sends `NOTIFY stackroute_session, '<id>'` (delivered at commit),
which `listen` turns into a callback per session id, so a watcher on any instance wakes as
soon as a transition is durable.

psycopg 3 and psycopg_pool are imported here only: `pip install 'stackroute[postgres]'`.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from stackroute.runtime.governance import RunStatus
from stackroute.runtime.state import RunState
from stackroute.runtime.trace import TraceEvent
from stackroute.server.service.pg_migrations import apply_migrations
from stackroute.server.service.store_records import (
    CatalogGoneError,
    CatalogInUseError,
    CatalogRecord,
    Claim,
    DuplicateRecordError,
    LeafExecution,
    LeaseLostError,
    SessionRecord,
    SessionRow,
    StoreBusyError,
    StoreUnavailableError,
    state_json,
    storable_text,
    strict_json,
)

log = logging.getLogger(__name__)

CHANNEL = "stackroute_session"
DEFAULT_LEASE_S = 10.0
_ROW_COLUMNS = ("id, catalog_id, status, task, is_flat, is_auto_approve, created_unix, "
                "updated_unix")
_EXPIRES = "clock_timestamp() + make_interval(secs => %(lease_s)s)"


def _psycopg() -> Any:
    try:
        import psycopg
        import psycopg_pool  # noqa: F401
    except ImportError as e:
        raise StoreUnavailableError(
            "a postgresql:// store needs psycopg 3 and psycopg_pool: pip install "
            "'stackroute[postgres]'") from e
    return psycopg


class PgSessionStore:
    """The service's PostgreSQL database, through a connection pool. Thread-safe."""

    is_shared = True

    def __init__(self, url: str, *, clock: Any = time.time, lease_s: float = DEFAULT_LEASE_S,
                 max_connections: int = 10, connect_timeout_s: float = 10.0) -> None:
        psycopg = _psycopg()
        from psycopg.rows import dict_row
        from psycopg_pool import ConnectionPool

        self.url = url
        self.clock = clock
        self.lease_s = lease_s
        self._psycopg = psycopg
        try:
            with psycopg.connect(url, autocommit=True,
                                 connect_timeout=max(1, int(connect_timeout_s))) as conn:
                applied = apply_migrations(conn)
        except psycopg.Error as e:
            raise StoreUnavailableError(f"cannot open the PostgreSQL store: {e}") from e
        if applied:
            log.info("PostgreSQL store: applied migrations %s", applied)
        self._pool = ConnectionPool(url, min_size=1, max_size=max_connections, open=False,
                                    kwargs={"row_factory": dict_row},
                                    check=ConnectionPool.check_connection,
                                    timeout=connect_timeout_s, name="stackroute-store")
        self._pool.open(wait=True, timeout=connect_timeout_s)

    def close(self) -> None:
        self._pool.close()

    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        """One transaction on a pooled connection; errors become the store's own types."""
        errors = self._psycopg.errors
        try:
            with self._pool.connection() as conn, conn.transaction():
                yield conn
        except errors.UniqueViolation as e:
            raise DuplicateRecordError(str(e).splitlines()[0]) from e
        except (self._psycopg.OperationalError, _pool_timeout()) as e:
            raise StoreBusyError(f"PostgreSQL store: {e}") from e

    def _query(self, sql: str, params: Any = None) -> list[dict[str, Any]]:
        with self._transaction() as conn:
            return list(conn.execute(sql, params).fetchall())

    # -- catalogs ----------------------------------------------------------------------------
    def put_catalog(self, record: CatalogRecord) -> bool:
        with self._transaction() as conn:
            cursor = conn.execute(
                "INSERT INTO catalogs (id, name, source, format, created_unix) VALUES (%s, %s, "
                "%s, %s, %s) ON CONFLICT (id) DO NOTHING",
                (record.id, record.name, record.source, record.format, record.created_unix))
            return bool(cursor.rowcount == 1)

    def catalogs(self) -> list[CatalogRecord]:
        return [CatalogRecord(**r) for r in self._query(
            "SELECT id, name, source, format, created_unix FROM catalogs "
            "ORDER BY created_unix, id")]

    def catalog(self, catalog_id: str) -> CatalogRecord | None:
        rows = self._query("SELECT id, name, source, format, created_unix FROM catalogs "
                           "WHERE id = %s", (catalog_id,))
        return CatalogRecord(**rows[0]) if rows else None

    def has_catalog(self, catalog_id: str) -> bool:
        return bool(self._query("SELECT 1 FROM catalogs WHERE id = %s", (catalog_id,)))

    def delete_catalog(self, catalog_id: str) -> bool:
        """Delete a catalog no running or paused session uses (`CatalogInUseError`
        otherwise); False if it is not stored. The catalog row is locked first, so a
        `create_session` on it (which takes a share lock on the row) commits before the count
        below, whose statement then sees that session, or waits and finds the catalog gone."""
        with self._transaction() as conn:
            if conn.execute("SELECT 1 FROM catalogs WHERE id = %s FOR UPDATE",
                            (catalog_id,)).fetchone() is None:
                return False
            num_active = int(conn.execute(
                "SELECT COUNT(*) AS n FROM sessions WHERE catalog_id = %s AND status IN "
                "(%s, %s)", (catalog_id, RunStatus.RUNNING.value,
                             RunStatus.PAUSED.value)).fetchone()["n"])
            if num_active:
                raise CatalogInUseError(catalog_id, num_active)
            conn.execute("DELETE FROM catalogs WHERE id = %s", (catalog_id,))
            return True

    # -- sessions ----------------------------------------------------------------------------
    def create_session(self, session_id: str, *, catalog_id: str, state: RunState,
                       is_flat: bool, is_auto_approve: bool, owner: str | None = None) -> int:
        """A new session (leased to `owner` when given); return its fencing token.
        `CatalogGoneError` when the catalog is not stored (another instance deleted it); the
        share lock on its row keeps a concurrent delete out until this commits."""
        now = self.clock()
        with self._transaction() as conn:
            if conn.execute("SELECT 1 FROM catalogs WHERE id = %s FOR SHARE",
                            (catalog_id,)).fetchone() is None:
                raise CatalogGoneError(f"catalog {catalog_id!r} is not in the store")
            conn.execute(
                "INSERT INTO sessions (id, catalog_id, status, task, is_flat, is_auto_approve, "
                "state, created_unix, updated_unix, owner, lease_expires, lease_token) VALUES "
                "(%(id)s, %(catalog_id)s, %(status)s, %(task)s, %(is_flat)s, %(auto)s, "
                f"%(state)s, %(now)s, %(now)s, %(owner)s, {_EXPIRES}, 1)",
                {"id": session_id, "catalog_id": catalog_id, "status": state.status.value,
                 "task": state.task, "is_flat": is_flat, "auto": is_auto_approve,
                 "state": state_json(state), "now": now, "owner": owner,
                 "lease_s": self.lease_s})
            _append(conn, session_id, state.trace)
            conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, session_id))
        return 1

    def save_step(self, session_id: str, state: RunState, events: Sequence[TraceEvent], *,
                  token: int | None = None) -> None:
        """The state after a transition and its new events, in one transaction, if `token` is
        still the session's lease token (None: unfenced, for tools and start-up repair). A
        state that is no longer running releases the lease in the same write."""
        with self._transaction() as conn:
            cursor = conn.execute(
                "UPDATE sessions SET status = %(status)s, state = %(state)s, "
                "updated_unix = %(now)s, "
                "owner = CASE WHEN %(status)s = 'running' THEN owner END, "
                f"lease_expires = CASE WHEN %(status)s = 'running' THEN {_EXPIRES} END "
                "WHERE id = %(id)s AND (%(token)s::bigint IS NULL OR lease_token = %(token)s)",
                {"status": state.status.value, "state": state_json(state),
                 "now": self.clock(), "id": session_id, "token": token,
                 "lease_s": self.lease_s})
            if cursor.rowcount != 1:
                found = conn.execute("SELECT lease_token FROM sessions WHERE id = %s",
                                     (session_id,)).fetchone()
                if found is None:
                    raise KeyError(f"no session {session_id!r} in the store")
                raise LeaseLostError(f"session {session_id}: lease token {token} is stale "
                                     f"(now {found['lease_token']}); not saved")
            _append(conn, session_id, events)
            conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, session_id))

    def session_row(self, session_id: str) -> SessionRow | None:
        rows = self._query(f"SELECT {_ROW_COLUMNS} FROM sessions WHERE id = %s", (session_id,))
        return SessionRow.from_row(rows[0]) if rows else None

    def load_session(self, session_id: str) -> SessionRecord | None:
        with self._transaction() as conn:  # the row is locked against a step for both reads
            rows = conn.execute(f"SELECT {_ROW_COLUMNS}, state FROM sessions WHERE id = %s "
                                "FOR SHARE", (session_id,)).fetchall()
            if not rows:
                return None
            events = [json.loads(r["event"]) for r in conn.execute(
                "SELECT event FROM transitions WHERE session_id = %s ORDER BY seq",
                (session_id,))]
        return SessionRecord.from_row(rows[0], events)

    def list_sessions(self, *, status: RunStatus | None = None, catalog_id: str | None = None,
                      limit: int = 100, offset: int = 0) -> list[SessionRow]:
        where: list[str] = []
        params: list[Any] = []
        if status is not None:
            where.append("status = %s")
            params.append(status.value)
        if catalog_id is not None:
            where.append("catalog_id = %s")
            params.append(catalog_id)
        sql = f"SELECT {_ROW_COLUMNS} FROM sessions"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_unix, id"
        if limit >= 0:  # SQLite's LIMIT -1 means all
            sql += " LIMIT %s"
            params.append(limit)
        sql += " OFFSET %s"
        params.append(offset)
        return [SessionRow.from_row(r) for r in self._query(sql, params)]

    def count_by_status(self) -> dict[str, int]:
        rows = self._query("SELECT status, COUNT(*) AS n FROM sessions GROUP BY status")
        return {str(r["status"]): int(r["n"]) for r in rows}

    def count_active_sessions(self, catalog_id: str) -> int:
        rows = self._query("SELECT COUNT(*) AS n FROM sessions WHERE catalog_id = %s AND "
                           "status IN (%s, %s)", (catalog_id, RunStatus.RUNNING.value,
                                                  RunStatus.PAUSED.value))
        return int(rows[0]["n"])

    def transitions(self, session_id: str, *, after_seq: int = -1) -> list[dict[str, Any]]:
        rows = self._query("SELECT event FROM transitions WHERE session_id = %s AND seq > %s "
                           "ORDER BY seq", (session_id, after_seq))
        return [json.loads(r["event"]) for r in rows]

    # -- leases ------------------------------------------------------------------------------
    def claim_session(self, session_id: str, owner: str, *, lease_s: float | None = None,
                      is_forced: bool = False) -> int | None:
        """Take the session's lease: granted when nobody holds it, it expired, `owner` holds
        it, or `is_forced` (a client's cancel: the holder is fenced off). Each grant bumps
        the token. None when another instance holds a live lease (or no such session)."""
        rows = self._query(
            f"UPDATE sessions SET owner = %(owner)s, lease_expires = {_EXPIRES}, "
            "lease_token = lease_token + 1 WHERE id = %(id)s AND (%(forced)s OR owner IS NULL "
            "OR owner = %(owner)s OR lease_expires < clock_timestamp()) RETURNING lease_token",
            {"owner": owner, "lease_s": lease_s or self.lease_s, "id": session_id,
             "forced": is_forced})
        return int(rows[0]["lease_token"]) if rows else None

    def claim_expired(self, owner: str, *, lease_s: float | None = None,
                      limit: int = 16) -> list[Claim]:
        """Claim running sessions nobody holds a live lease on (their instance died, or one
        that could not run them released them and their back-off is over), each with the
        token this claim gave it. `SKIP LOCKED`: instances claiming at once split them."""
        rows = self._query(
            f"UPDATE sessions SET owner = %(owner)s, lease_expires = {_EXPIRES}, "
            "lease_token = lease_token + 1 WHERE id IN (SELECT id FROM sessions WHERE "
            "status = 'running' AND (lease_expires IS NULL OR "
            "lease_expires < clock_timestamp()) ORDER BY created_unix LIMIT %(limit)s "
            "FOR UPDATE SKIP LOCKED) RETURNING id, lease_token",
            {"owner": owner, "lease_s": lease_s or self.lease_s,
             "limit": limit if limit >= 0 else None})
        return [Claim(str(r["id"]), int(r["lease_token"])) for r in rows]

    def renew_leases(self, owner: str, *, lease_s: float | None = None) -> int:
        """Extend the leases `owner` holds on running sessions (the instance's heartbeat; a
        lease left on a paused one by a failed release expires instead)."""
        with self._transaction() as conn:
            return int(conn.execute(
                f"UPDATE sessions SET lease_expires = {_EXPIRES} WHERE owner = %(owner)s "
                "AND status = 'running'",
                {"owner": owner, "lease_s": lease_s or self.lease_s}).rowcount)

    def release_session(self, session_id: str, token: int, *,
                        retry_after_s: float = 0.0) -> None:
        """Let go of the lease `token` (no-op when another claim has superseded it). With
        `retry_after_s` (this instance could not run the session: a catalog it cannot load)
        no takeover claims it before then, though a client's request still may at once."""
        with self._transaction() as conn:
            conn.execute(
                "UPDATE sessions SET owner = NULL, lease_expires = CASE WHEN %(after)s > 0 "
                "THEN clock_timestamp() + make_interval(secs => %(after)s) END "
                "WHERE id = %(id)s AND lease_token = %(token)s",
                {"id": session_id, "token": token, "after": retry_after_s})

    def lease_token(self, session_id: str) -> int | None:
        rows = self._query("SELECT lease_token FROM sessions WHERE id = %s", (session_id,))
        return int(rows[0]["lease_token"]) if rows else None

    # -- leaf executions ---------------------------------------------------------------------
    def leaf_execution(self, call_id: str) -> LeafExecution | None:
        rows = self._query("SELECT * FROM leaf_executions WHERE call_id = %s", (call_id,))
        if not rows:
            return None
        return LeafExecution.from_row(rows[0])

    def begin_leaf(self, call_id: str, *, path: str, digest: str,
                   session_id: str | None = None, token: int | None = None) -> None:
        """Record that a leaf call is about to run. With a session and token, only while the
        token holds: the session row is locked for the check and the insert, so a claim by
        another instance lands before (this raises `LeaseLostError`) or after (the other
        instance finds the call begun)."""
        with self._transaction() as conn:
            if session_id is not None and token is not None:
                row = conn.execute("SELECT lease_token FROM sessions WHERE id = %s FOR UPDATE",
                                   (session_id,)).fetchone()
                if row is None or int(row["lease_token"]) != token:
                    raise LeaseLostError(f"session {session_id}: lease token {token} is stale; "
                                         f"leaf call {call_id} not begun")
            conn.execute("INSERT INTO leaf_executions (call_id, path, digest, is_finished, "
                         "started_unix) VALUES (%s, %s, %s, false, %s)",
                         (call_id, path, digest, self.clock()))

    def finish_leaf(self, call_id: str, *, result: Any, error: str | None) -> None:
        """Not fenced: the handler ran, and that fact is kept whoever holds the lease now."""
        with self._transaction() as conn:
            cursor = conn.execute(
                "UPDATE leaf_executions SET is_finished = true, result = %s, error = %s, "
                "finished_unix = %s WHERE call_id = %s",
                (strict_json(result), storable_text(error), self.clock(), call_id))
            if cursor.rowcount != 1:
                raise KeyError(f"leaf call {call_id!r} was never begun")

    # -- events ------------------------------------------------------------------------------
    def listen(self, on_session: Callable[[str], None]) -> _Listener:
        """Call `on_session(id)` for every transition saved by any instance."""
        return _Listener(self.url, self._psycopg, on_session)


class _Listener:  # LISTEN on its own connection, in a daemon thread; reconnects
    def __init__(self, url: str, psycopg: Any, on_session: Callable[[str], None]) -> None:
        self.url, self._psycopg, self.on_session = url, psycopg, on_session
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="store-listen", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with self._psycopg.connect(self.url, autocommit=True) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=0.5):
                            self.on_session(note.payload)
            except self._psycopg.Error as e:
                log.warning("store listener lost its connection (%s); reconnecting", e)
                self._stop.wait(0.5)


def _pool_timeout() -> type[Exception]:
    from psycopg_pool import PoolTimeout

    return PoolTimeout


def _append(conn: Any, session_id: str, events: Sequence[TraceEvent]) -> None:
    if not events:
        return
    with conn.cursor() as cur:
        cur.executemany("INSERT INTO transitions (session_id, seq, event) VALUES (%s, %s, %s)",
                        [(session_id, e.seq, strict_json(e.to_dict())) for e in events])

