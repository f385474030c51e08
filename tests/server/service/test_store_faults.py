"""Issue 15.4: SQLite faults must never lose a tool's outcome or wedge a session. Each test is
a reproduction: another connection holds the database's write lock (as a backup tool or a
second process would) at the worst moment."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from doubles import PlanEngine
from session_kit import BANK_CATALOG, wait_for_status
from stackroute.runtime.governance import RunStatus
from stackroute.runtime.handlers import HandlerTable
from stackroute.server.service.catalog_registry import CatalogRegistry
from stackroute.server.service.session_options import SessionOptions
from stackroute.server.service.sessions import SessionService
from stackroute.server.service.store import CatalogRecord, SessionStore, StoreUnavailableError

BUSY_TIMEOUT_S = 0.2  # the store gives up on a lock after this; the locks below last longer


class Locker:
    """Another connection to the same file that takes the write lock on demand."""

    def __init__(self, db: Path) -> None:
        self.conn = sqlite3.connect(db, isolation_level=None, check_same_thread=False)

    def hold(self, seconds: float) -> threading.Thread:
        self.conn.execute("BEGIN IMMEDIATE")

        def release() -> None:
            time.sleep(seconds)
            self.conn.execute("COMMIT")

        thread = threading.Thread(target=release)
        thread.start()
        return thread

    def close(self) -> None:
        self.conn.close()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "stackroute.db"


def service(db: Path, handlers: HandlerTable, engine: PlanEngine,
            ) -> tuple[SessionStore, SessionService, str]:
    store = SessionStore(db, busy_timeout_s=BUSY_TIMEOUT_S)
    catalogs = CatalogRegistry(store, engine)
    catalog_id = catalogs.add_text(json.dumps(BANK_CATALOG))[0].id
    return store, SessionService(store, catalogs, engine, handlers=handlers,
                                 options=SessionOptions(leaf_isolation="thread")), catalog_id


def balance_handler(calls: list[str], during: Callable[[], Any] = lambda: None,
                    ) -> HandlerTable:
    def balance() -> dict[str, Any]:
        calls.append("balance")
        during()
        return {"balance": 12}
    return HandlerTable({"payments/balance": balance})


def test_a_lock_during_a_leaf_call_neither_loses_the_outcome_nor_reruns_it(db: Path) -> None:
    """The handler runs once; its outcome waits for the lock, then is saved; the session
    finishes with the call recorded (before: `error: database is locked`, `calls=[]`)."""
    locker = Locker(db)
    calls: list[str] = []
    holders: list[threading.Thread] = []
    store, sessions, catalog_id = service(
        db, balance_handler(calls, lambda: holders.append(locker.hold(1.0))),
        PlanEngine(plan=["payments", "balance"]))
    try:
        sid = sessions.create(catalog_id, "What is my balance?").row.id
        assert wait_for_status(store, sid, timeout_s=15) is RunStatus.DONE
        record = sessions.get(sid)
        assert calls == ["balance"]
        assert [c["path"] for c in record.state.calls] == ["payments/balance"]
        assert record.state.calls[0]["result"] == {"balance": 12}
        assert store.leaf_execution(record.state.calls[0]["call_id"]).is_finished  # type: ignore[union-attr]
    finally:
        for thread in holders:
            thread.join()
        sessions.close()
        store.close()
        locker.close()


def test_a_lock_at_a_save_keeps_the_worker_retrying(db: Path) -> None:
    """A step whose save meets the lock is saved once the lock goes; the session does not stay
    `running` without a worker (before: the worker dropped it)."""
    locker = Locker(db)
    gate = threading.Event()
    store, sessions, catalog_id = service(db, balance_handler([]),
                                          PlanEngine(plan=["payments", "balance"], gate=gate))
    try:
        sid = sessions.create(catalog_id, "What is my balance?").row.id
        holder = locker.hold(1.0)
        gate.set()  # the first routing call now runs and its save meets the lock
        holder.join()
        assert wait_for_status(store, sid, timeout_s=15) is RunStatus.DONE
        assert [c["path"] for c in sessions.get(sid).state.calls] == ["payments/balance"]
    finally:
        gate.set()
        sessions.close()
        store.close()
        locker.close()


def test_reads_do_not_wait_for_a_write_that_waits_for_the_lock(db: Path) -> None:
    """Before: `GET /metrics` (count_by_status) waited behind a write stuck on the busy
    timeout, because both took the store's one lock."""
    store = SessionStore(db, busy_timeout_s=2.0)
    locker = Locker(db)
    holder = locker.hold(1.5)
    writer = threading.Thread(target=store.put_catalog, args=(CatalogRecord(
        id="c", name="c", source="{}", format="json", created_unix=0.0),))
    try:
        writer.start()
        time.sleep(0.1)  # the write is now waiting for the lock
        started = time.perf_counter()
        assert store.count_by_status() == {}
        assert time.perf_counter() - started < 0.5
    finally:
        holder.join()
        writer.join()
        store.close()
        locker.close()


def test_a_failed_commit_leaves_no_open_transaction(db: Path) -> None:
    """Before: COMMIT sat outside the error handling, so a COMMIT that failed left the
    connection inside the transaction, serving uncommitted state and failing every write."""
    store = SessionStore(db)
    try:
        with pytest.raises(sqlite3.IntegrityError), store._transaction() as c:
            c.execute("PRAGMA defer_foreign_keys=ON")  # the check moves to COMMIT
            c.execute("INSERT INTO transitions (session_id, seq, event) VALUES "
                      "('no-such-session', 0, '{}')")
        assert store.put_catalog(CatalogRecord(id="c", name="c", source="{}", format="json",
                                               created_unix=0.0))
        assert [r.id for r in store.catalogs()] == ["c"]
    finally:
        store.close()


def test_a_database_that_cannot_use_wal_is_refused(db: Path) -> None:
    """WAL is verified at open: a reader holding the file in rollback-journal mode keeps
    `journal_mode=WAL` from taking effect, and the store refuses to start."""
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("CREATE TABLE t (x)")
    other.execute("BEGIN")
    other.execute("SELECT * FROM t").fetchall()  # a shared lock in DELETE mode
    try:
        with pytest.raises(StoreUnavailableError, match="WAL"):
            SessionStore(db, busy_timeout_s=BUSY_TIMEOUT_S)
    finally:
        other.execute("COMMIT")
        other.close()
