"""SQLite persistence for the service: catalogs, sessions, their transitions, leaf executions.

A session's state is written at every transition together with the transition's trace events,
in one transaction, so the database always holds a state and exactly the trace that led to it.
The state is stored without its trace (the `transitions` table holds it, one row per event)
so a step writes its new events once instead of rewriting the whole trace every time.

One writer connection guarded by a lock: SQLite serialises writers anyway, every statement
here is short (well under a millisecond, plus the fsync of a commit), and a lock keeps
transactions from different threads from interleaving on the shared connection. Reads use a
second connection (WAL lets them run beside a write), so a write waiting for another
process's lock never holds up a read. WAL is verified when the store opens.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from stackroute.runtime.governance import RunStatus
from stackroute.runtime.state import RunState
from stackroute.runtime.trace import TraceEvent
from stackroute.server.service.store_records import (
    CatalogGoneError,
    CatalogInUseError,
    CatalogRecord,
    Claim,
    LeafExecution,
    SessionRecord,
    SessionRow,
    StoreBusyError,
    StoreUnavailableError,
    finite,
    state_json,
    storable_text,
    strict_json,
)

# Records and helpers other modules still import from here (they live in store_records).
__all__ = ["MEMORY", "CatalogRecord", "SessionRecord", "SessionRow", "SessionStore",
           "StoreUnavailableError", "finite", "strict_json"]

SCHEMA_VERSION = 1
MEMORY = ":memory:"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS catalogs (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    source TEXT NOT NULL,
    format TEXT NOT NULL,
    created_unix REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    catalog_id TEXT NOT NULL,
    status TEXT NOT NULL,
    task TEXT NOT NULL,
    is_flat INTEGER NOT NULL,
    is_auto_approve INTEGER NOT NULL,
    state TEXT NOT NULL,
    created_unix REAL NOT NULL,
    updated_unix REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_by_status ON sessions (status, created_unix);
CREATE TABLE IF NOT EXISTS transitions (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    event TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE TABLE IF NOT EXISTS leaf_executions (
    call_id TEXT PRIMARY KEY,
    path TEXT NOT NULL,
    digest TEXT NOT NULL,
    is_finished INTEGER NOT NULL,
    result TEXT,
    error TEXT,
    started_unix REAL NOT NULL,
    finished_unix REAL
);
"""


class SessionStore:
    """The service's SQLite database. Thread-safe; every write is one transaction.

    Embedded: one process uses it, so it satisfies `StoreBackend`'s leases trivially (every
    claim is granted with token 0, and every running session is this process's to resume).
    """

    is_shared = False
    lease_s = 0.0

    def __init__(self, path: str | Path = MEMORY, *, clock: Any = time.time,
                 busy_timeout_s: float = 10.0) -> None:
        self.path = str(path)
        self.clock = clock
        if self.path != MEMORY:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()  # the writer: one transaction at a time
        # isolation_level=None: no implicit transactions; `_transaction` opens them explicitly.
        self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None,
                                     timeout=busy_timeout_s)
        self._conn.row_factory = sqlite3.Row
        try:
            self.journal_mode = str(self._conn.execute("PRAGMA journal_mode=WAL").fetchone()[0])
        except sqlite3.OperationalError as e:
            self._conn.close()
            raise StoreUnavailableError(f"database {self.path} cannot be switched to WAL "
                                        f"journaling ({e}); refusing to start") from e
        if self.path != MEMORY and self.journal_mode.lower() != "wal":
            self._conn.close()
            # Without WAL a reader blocks COMMIT, and a write can wait out the busy timeout
            # with a leaf call's outcome in hand: the service's guarantees need WAL.
            raise StoreUnavailableError(f"database {self.path} is in {self.journal_mode!r} "
                                        "journal mode, not WAL; refusing to start")
        # synchronous=FULL: every commit is fsynced before it returns. NORMAL (the usual WAL
        # choice) already survives a killed process (SIGKILL): a committed transaction is in
        # the WAL file in the OS page cache. But it can lose the last commits on power loss or
        # an OS crash, and what we commit includes the record that a leaf ran; losing it would
        # run a tool (send money) a second time on resume. One fsync per transition costs
        # about a millisecond on an SSD against tens to hundreds of milliseconds per routing
        # call, so durability is nearly free here.
        self._conn.execute("PRAGMA synchronous=FULL")
        self._conn.execute("PRAGMA foreign_keys=ON")
        self._conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
        with self._transaction() as c:
            version = int(c.execute("PRAGMA user_version").fetchone()[0])
            if version > SCHEMA_VERSION:
                raise RuntimeError(f"database {self.path} has schema version {version}, newer "
                                   f"than this stackroute's {SCHEMA_VERSION}")
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    c.execute(statement)
            c.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        # Reads use their own connection and lock: in WAL mode a reader never waits for a
        # writer, so a write stuck on the busy timeout does not hold up `GET /metrics`. An
        # in-memory database is one connection's own, so there the writer serves reads too.
        if self.path == MEMORY:
            self._reader, self._read_lock = self._conn, self._lock
        else:
            self._reader = sqlite3.connect(self.path, check_same_thread=False,
                                           isolation_level=None, timeout=busy_timeout_s)
            self._reader.row_factory = sqlite3.Row
            self._read_lock = threading.RLock()

    def pragma(self, name: str) -> Any:
        with self._lock:
            return self._conn.execute(f"PRAGMA {name}").fetchone()[0]

    def close(self) -> None:
        with self._lock, self._read_lock:
            if self._reader is not self._conn:
                self._reader.close()
            self._conn.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction. Whatever fails, the COMMIT included, rolls it back, so the
        connection is never left inside a transaction."""
        with self._lock, _busy():
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with self._read_lock, _busy():
            return self._reader.execute(sql, params).fetchall()

    @contextmanager
    def _snapshot(self) -> Iterator[None]:
        """Reads that see one committed state (a read transaction on the reader)."""
        with self._read_lock:
            if self._reader is self._conn:
                yield
                return
            with _busy():
                self._reader.execute("BEGIN")
            try:
                yield
            finally:
                self._reader.execute("COMMIT")

    # -- catalogs ----------------------------------------------------------------------------
    def put_catalog(self, record: CatalogRecord) -> bool:
        """Store a catalog; False if one with this id is already stored (ids are content
        hashes, so it is the same catalog)."""
        with self._transaction() as c:
            cursor = c.execute(
                "INSERT OR IGNORE INTO catalogs (id, name, source, format, created_unix) "
                "VALUES (?, ?, ?, ?, ?)",
                (record.id, record.name, record.source, record.format, record.created_unix))
            return cursor.rowcount == 1

    def catalogs(self) -> list[CatalogRecord]:
        rows = self._query("SELECT * FROM catalogs ORDER BY created_unix, id")
        return [CatalogRecord(id=r["id"], name=r["name"], source=r["source"],
                              format=r["format"], created_unix=r["created_unix"]) for r in rows]

    def catalog(self, catalog_id: str) -> CatalogRecord | None:
        rows = self._query("SELECT * FROM catalogs WHERE id = ?", (catalog_id,))
        return None if not rows else CatalogRecord(
            id=rows[0]["id"], name=rows[0]["name"], source=rows[0]["source"],
            format=rows[0]["format"], created_unix=rows[0]["created_unix"])

    def has_catalog(self, catalog_id: str) -> bool:
        return bool(self._query("SELECT 1 FROM catalogs WHERE id = ?", (catalog_id,)))

    def delete_catalog(self, catalog_id: str) -> bool:
        """Delete a catalog no running or paused session uses (`CatalogInUseError` otherwise,
        in the same transaction); False if it is not stored."""
        with self._transaction() as c:
            num_active = int(c.execute(
                "SELECT COUNT(*) FROM sessions WHERE catalog_id = ? AND status IN (?, ?)",
                (catalog_id, RunStatus.RUNNING.value, RunStatus.PAUSED.value)).fetchone()[0])
            if num_active:
                raise CatalogInUseError(catalog_id, num_active)
            return c.execute("DELETE FROM catalogs WHERE id = ?", (catalog_id,)).rowcount == 1

    # -- sessions ----------------------------------------------------------------------------
    def create_session(self, session_id: str, *, catalog_id: str, state: RunState,
                       is_flat: bool, is_auto_approve: bool, owner: str | None = None) -> int:
        """A new session with its initial state and the transitions recorded so far; its
        lease token (always 0 here: see the class). `CatalogGoneError` when the catalog is not
        stored (deleted): checked in the same transaction as the insert."""
        now = self.clock()
        with self._transaction() as c:
            if c.execute("SELECT 1 FROM catalogs WHERE id = ?", (catalog_id,)).fetchone() is None:
                raise CatalogGoneError(f"catalog {catalog_id!r} is not in the store")
            c.execute(
                "INSERT INTO sessions (id, catalog_id, status, task, is_flat, is_auto_approve, "
                "state, created_unix, updated_unix) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (session_id, catalog_id, state.status.value, state.task, int(is_flat),
                 int(is_auto_approve), state_json(state), now, now))
            _append(c, session_id, state.trace)
        return 0

    def save_step(self, session_id: str, state: RunState, events: Sequence[TraceEvent], *,
                  token: int | None = None) -> None:
        """Write the state after a transition and append that transition's trace events, in one
        transaction: either both are durable or neither is."""
        with self._transaction() as c:
            cursor = c.execute(
                "UPDATE sessions SET status = ?, state = ?, updated_unix = ? WHERE id = ?",
                (state.status.value, state_json(state), self.clock(), session_id))
            if cursor.rowcount != 1:
                raise KeyError(f"no session {session_id!r} in the store")
            _append(c, session_id, events)

    def session_row(self, session_id: str) -> SessionRow | None:
        rows = self._query("SELECT * FROM sessions WHERE id = ?", (session_id,))
        return SessionRow.from_row(rows[0]) if rows else None

    def load_session(self, session_id: str) -> SessionRecord | None:
        """The session with its state and whole trace, as last committed."""
        with self._snapshot():
            rows = self._query("SELECT * FROM sessions WHERE id = ?", (session_id,))
            if not rows:
                return None
            events = self.transitions(session_id)
        return SessionRecord.from_row(rows[0], events)

    def list_sessions(self, *, status: RunStatus | None = None, catalog_id: str | None = None,
                      limit: int = 100, offset: int = 0) -> list[SessionRow]:
        where, params = [], []
        if status is not None:
            where.append("status = ?")
            params.append(status.value)
        if catalog_id is not None:
            where.append("catalog_id = ?")
            params.append(catalog_id)
        sql = "SELECT id, catalog_id, status, task, is_flat, is_auto_approve, created_unix, " \
              "updated_unix FROM sessions"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_unix, id LIMIT ? OFFSET ?"
        return [SessionRow.from_row(r) for r in self._query(sql, [*params, limit, offset])]

    def count_by_status(self) -> dict[str, int]:
        rows = self._query("SELECT status, COUNT(*) FROM sessions GROUP BY status")
        return {str(r[0]): int(r[1]) for r in rows}

    def count_active_sessions(self, catalog_id: str) -> int:
        rows = self._query("SELECT COUNT(*) FROM sessions WHERE catalog_id = ? AND status IN "
                           "(?, ?)", (catalog_id, RunStatus.RUNNING.value,
                                      RunStatus.PAUSED.value))
        return int(rows[0][0])

    def transitions(self, session_id: str, *, after_seq: int = -1) -> list[dict[str, Any]]:
        """The session's trace events with `seq > after_seq`, in order (as dicts)."""
        rows = self._query("SELECT event FROM transitions WHERE session_id = ? AND seq > ? "
                           "ORDER BY seq", (session_id, after_seq))
        return [json.loads(r["event"]) for r in rows]

    # -- leases: one process, so always held ------------------------------------------------
    def claim_session(self, session_id: str, owner: str, *, lease_s: float,
                      is_forced: bool = False) -> int | None:
        return 0

    def claim_expired(self, owner: str, *, lease_s: float, limit: int) -> list[Claim]:
        """Every running session: a process that opens the file is its only user, so what is
        running was left by a stopped process."""
        return [Claim(r.id, 0) for r in self.list_sessions(status=RunStatus.RUNNING,
                                                           limit=limit)]

    def renew_leases(self, owner: str, *, lease_s: float) -> int:
        return 0

    def release_session(self, session_id: str, token: int, *,
                        retry_after_s: float = 0.0) -> None:
        return None

    def lease_token(self, session_id: str) -> int | None:
        return 0

    def listen(self, on_session: Any) -> None:
        return None  # one process: its own workers wake its watchers

    # -- leaf executions (idempotency) -------------------------------------------------------
    def leaf_execution(self, call_id: str) -> LeafExecution | None:
        rows = self._query("SELECT * FROM leaf_executions WHERE call_id = ?", (call_id,))
        if not rows:
            return None
        return LeafExecution.from_row(rows[0])

    def begin_leaf(self, call_id: str, *, path: str, digest: str,
                   session_id: str | None = None, token: int | None = None) -> None:
        """Record that a leaf call is about to run (committed before the handler starts)."""
        with self._transaction() as c:
            c.execute("INSERT INTO leaf_executions (call_id, path, digest, is_finished, "
                      "started_unix) VALUES (?, ?, ?, 0, ?)",
                      (call_id, path, digest, self.clock()))

    def finish_leaf(self, call_id: str, *, result: Any, error: str | None) -> None:
        """Record a leaf call's outcome (`result` must be JSON-serialisable)."""
        with self._transaction() as c:
            cursor = c.execute(
                "UPDATE leaf_executions SET is_finished = 1, result = ?, error = ?, "
                "finished_unix = ? WHERE call_id = ?",
                (strict_json(result), storable_text(error), self.clock(), call_id))
            if cursor.rowcount != 1:
                raise KeyError(f"leaf call {call_id!r} was never begun")


def _append(c: sqlite3.Connection, session_id: str, events: Sequence[TraceEvent]) -> None:
    c.executemany("INSERT INTO transitions (session_id, seq, event) VALUES (?, ?, ?)",
                  [(session_id, e.seq, strict_json(e.to_dict()))
                   for e in events])


@contextmanager
def _busy() -> Iterator[None]:
    """SQLite's "database is locked" (another process holds the lock past the busy timeout)
    and its other operational errors as the store's own retryable error."""
    try:
        yield
    except sqlite3.OperationalError as e:
        raise StoreBusyError(f"SQLite store: {e}") from e
