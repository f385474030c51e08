"""The store seam (`StoreBackend`) on both backends, SQLite and a real PostgreSQL: the same
records round-trip, a step is atomic, leaf calls are recorded once; and on PostgreSQL the
parts that let several instances share it: migrations (idempotent, concurrent), leases,
fencing, takeover, notifications."""

from __future__ import annotations

import math
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from stackroute.runtime.governance import Limits, RunStatus
from stackroute.runtime.messages import Message
from stackroute.runtime.state import RunState
from stackroute.runtime.trace import EventKind, TraceEvent
from stackroute.server.service.pg_migrations import SchemaTooNewError
from stackroute.server.service.store_protocol import StoreBackend
from stackroute.server.service.store_records import (
    CatalogGoneError,
    CatalogInUseError,
    CatalogRecord,
    Claim,
    DuplicateRecordError,
    LeaseLostError,
)
from stackroute.server.service.store_url import open_store

DUPLICATE = (sqlite3.IntegrityError, DuplicateRecordError)


def make_state(run_id: str = "s1", *, num_events: int = 2) -> RunState:
    state = RunState(run_id=run_id, catalog="bank", conversation=[Message("user", "hi")],
                     limits=Limits(max_steps=7))
    for _ in range(num_events):
        add_event(state)
    return state


def stored_catalogs(store: StoreBackend, *ids: str) -> None:
    """Sessions name a catalog the store holds (a create on a missing one is refused)."""
    for cid in ids:
        store.put_catalog(CatalogRecord(id=cid, name=cid, source="{}", format="json",
                                        created_unix=0.0))


def add_event(state: RunState) -> TraceEvent:
    event = TraceEvent(seq=len(state.trace), kind=EventKind.ROUTE, frame_id=0, parent_id=None,
                       path="", decision="payments", menu=("payments", "DONE"),
                       probabilities={"payments": 0.75, "DONE": 0.25}, time_unix=1.0)
    state.trace.append(event)
    return event


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreBackend]:
    db = str(tmp_path / "s.db") if request.param == "sqlite" \
        else request.getfixturevalue("pg_url")
    s = open_store(db, lease_s=5.0)
    assert isinstance(s, StoreBackend)
    yield s
    s.close()


@pytest.fixture
def pg(pg_url: str) -> Iterator[StoreBackend]:
    s = open_store(pg_url, lease_s=0.5)
    yield s
    s.close()


def test_catalogs_round_trip_and_same_id_is_kept_once(store: StoreBackend) -> None:
    record = CatalogRecord(id="bank-1", name="bank", source="{}", format="json",
                           created_unix=5.0)
    assert store.put_catalog(record) is True
    assert store.put_catalog(record) is False
    assert store.catalogs() == [record] and store.catalog("bank-1") == record
    assert store.catalog("nope") is None
    assert store.delete_catalog("bank-1") is True
    assert store.delete_catalog("bank-1") is False
    assert store.catalogs() == []


def test_session_state_and_trace_round_trip(store: StoreBackend) -> None:
    state = make_state()
    stored_catalogs(store, "bank-1")
    store.create_session("s1", catalog_id="bank-1", state=state, is_flat=False,
                         is_auto_approve=True)
    add_event(state)
    state.num_steps = 1
    state.status = RunStatus.PAUSED
    store.save_step("s1", state, state.trace[2:])
    record = store.load_session("s1")
    assert record is not None
    assert record.state.to_dict() == state.to_dict()
    assert record.row.status is RunStatus.PAUSED
    assert record.row.is_auto_approve and not record.row.is_flat
    assert record.row.task == "hi" and record.row.catalog_id == "bank-1"
    assert [e["seq"] for e in store.transitions("s1")] == [0, 1, 2]
    assert [e["seq"] for e in store.transitions("s1", after_seq=1)] == [2]
    assert store.load_session("nope") is None and store.session_row("nope") is None
    with pytest.raises(KeyError):
        store.save_step("nope", state, [])


def test_a_step_is_atomic(store: StoreBackend) -> None:
    state = make_state()
    stored_catalogs(store, "c")
    store.create_session("s1", catalog_id="c", state=state, is_flat=False,
                         is_auto_approve=False)
    state.num_steps = 99
    state.status = RunStatus.DONE
    with pytest.raises(DUPLICATE):  # seq 1 is already stored
        store.save_step("s1", state, state.trace[1:])
    record = store.load_session("s1")
    assert record is not None
    assert record.state.num_steps == 0 and record.row.status is RunStatus.RUNNING
    assert len(record.state.trace) == 2


def test_list_filters_and_counts(store: StoreBackend) -> None:
    stored_catalogs(store, "a", "b")
    for i, status in enumerate([RunStatus.RUNNING, RunStatus.PAUSED, RunStatus.DONE]):
        state = make_state(f"s{i}")
        state.status = status
        store.create_session(f"s{i}", catalog_id="a" if i < 2 else "b", state=state,
                             is_flat=False, is_auto_approve=False)
    assert [r.id for r in store.list_sessions()] == ["s0", "s1", "s2"]
    assert [r.id for r in store.list_sessions(limit=-1)] == ["s0", "s1", "s2"]
    assert [r.id for r in store.list_sessions(status=RunStatus.PAUSED)] == ["s1"]
    assert [r.id for r in store.list_sessions(catalog_id="b")] == ["s2"]
    assert [r.id for r in store.list_sessions(limit=1, offset=1)] == ["s1"]
    assert store.count_active_sessions("a") == 2
    assert store.count_active_sessions("b") == 0
    assert store.count_by_status() == {"running": 1, "paused": 1, "done": 1}


def test_leaf_execution_rows(store: StoreBackend) -> None:
    assert store.leaf_execution("s1:0") is None
    store.begin_leaf("s1:0", path="payments/send_money", digest="abc")
    begun = store.leaf_execution("s1:0")
    assert begun is not None and not begun.is_finished and begun.result is None
    store.finish_leaf("s1:0", result={"sent": 5, "ratio": math.inf}, error=None)
    done = store.leaf_execution("s1:0")
    assert done is not None and done.is_finished
    assert done.result == {"sent": 5, "ratio": None}  # strict JSON: no Infinity
    with pytest.raises(DUPLICATE):
        store.begin_leaf("s1:0", path="payments/send_money", digest="abc")
    with pytest.raises(KeyError):
        store.finish_leaf("never-begun", result=None, error="x")


def test_the_creator_holds_the_lease_and_running_sessions_are_resumable(
        store: StoreBackend) -> None:
    stored_catalogs(store, "c")
    token = store.create_session("s1", catalog_id="c", state=make_state(), is_flat=False,
                                 is_auto_approve=False, owner="a")
    assert store.lease_token("s1") == token
    store.save_step("s1", make_state(num_events=0), [], token=token)
    # SQLite: one process, everything running is this process's; PostgreSQL: a's lease.
    assert store.claim_expired("b", lease_s=5.0, limit=10) == ([] if store.is_shared
                                                                 else [Claim("s1", 0)])


def test_a_session_on_a_missing_catalog_is_refused_and_a_used_one_is_kept(
        store: StoreBackend) -> None:
    with pytest.raises(CatalogGoneError):
        store.create_session("s1", catalog_id="gone", state=make_state(), is_flat=False,
                             is_auto_approve=False)
    assert store.session_row("s1") is None
    stored_catalogs(store, "c")
    store.create_session("s1", catalog_id="c", state=make_state(), is_flat=False,
                         is_auto_approve=False)
    with pytest.raises(CatalogInUseError, match="1 running or paused"):
        store.delete_catalog("c")
    assert store.has_catalog("c")
    done = make_state()
    done.status = RunStatus.DONE
    store.save_step("s1", done, [])
    assert store.delete_catalog("c") and not store.has_catalog("c")


# -- PostgreSQL only ---------------------------------------------------------------------------
def test_migrations_are_idempotent_and_safe_when_instances_start_at_once(pg_url: str) -> None:
    import psycopg

    errors: list[BaseException] = []
    opened: list[StoreBackend] = []

    def start() -> None:
        try:
            opened.append(open_store(pg_url))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in opened:
        s.close()
    assert errors == [] and len(opened) == 4
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute("SELECT version FROM stackroute_schema").fetchall()
        assert rows == [(1,)]
        conn.execute("INSERT INTO stackroute_schema VALUES (99, 'future', 0)")
    with pytest.raises(SchemaTooNewError, match="schema version 99, newer than"):
        open_store(pg_url)


def test_one_owner_at_a_time_and_a_stale_owner_cannot_write(pg: StoreBackend) -> None:
    stored_catalogs(pg, "c")
    token_a = pg.create_session("s1", catalog_id="c", state=make_state(), is_flat=False,
                                is_auto_approve=False, owner="a")
    assert pg.claim_session("s1", "b", lease_s=0.5) is None  # a's lease is live
    assert pg.claim_expired("b", lease_s=0.5, limit=10) == []
    time.sleep(0.7)  # a stops renewing: its lease expires
    [claim] = pg.claim_expired("b", lease_s=5.0, limit=10)
    token_b = claim.token
    assert claim.session_id == "s1" and pg.lease_token("s1") == token_b
    assert token_b is not None and token_b > token_a
    state = make_state(num_events=2)
    add_event(state)
    with pytest.raises(LeaseLostError):  # a comes back: fenced off
        pg.save_step("s1", state, state.trace[2:], token=token_a)
    with pytest.raises(LeaseLostError):
        pg.begin_leaf("s1:0", path="x", digest="d", session_id="s1", token=token_a)
    assert pg.leaf_execution("s1:0") is None
    assert [e["seq"] for e in pg.transitions("s1")] == [0, 1]
    pg.begin_leaf("s1:0", path="x", digest="d", session_id="s1", token=token_b)
    pg.save_step("s1", state, state.trace[2:], token=token_b)
    assert [e["seq"] for e in pg.transitions("s1")] == [0, 1, 2]
    # A renewed lease is not taken over; a forced claim (a client's cancel) is.
    assert pg.renew_leases("b", lease_s=5.0) == 1
    assert pg.claim_session("s1", "c", lease_s=5.0) is None
    token_c = pg.claim_session("s1", "c", lease_s=5.0, is_forced=True)
    assert token_c is not None and token_c > token_b
    with pytest.raises(LeaseLostError):
        pg.save_step("s1", state, [], token=token_b)


def test_a_session_that_stops_running_releases_its_lease(pg: StoreBackend) -> None:
    stored_catalogs(pg, "c")
    token = pg.create_session("s1", catalog_id="c", state=make_state(), is_flat=False,
                              is_auto_approve=False, owner="a")
    state = make_state()
    state.status = RunStatus.PAUSED
    pg.save_step("s1", state, [], token=token)
    assert pg.claim_session("s1", "b", lease_s=5.0) == token + 1  # no wait for the expiry


def test_a_release_with_a_back_off_keeps_takeovers_away_but_not_clients(
        pg: StoreBackend) -> None:
    stored_catalogs(pg, "c")
    token = pg.create_session("s1", catalog_id="c", state=make_state(), is_flat=False,
                              is_auto_approve=False, owner="a")
    pg.release_session("s1", token - 1, retry_after_s=5.0)  # a stale token: a no-op
    assert pg.claim_session("s1", "b", lease_s=5.0) is None
    pg.release_session("s1", token, retry_after_s=0.4)
    assert pg.claim_expired("b", lease_s=5.0, limit=10) == []
    time.sleep(0.5)
    assert [c.session_id for c in pg.claim_expired("b", lease_s=5.0, limit=10)] == ["s1"]
    pg.release_session("s1", token + 1, retry_after_s=5.0)
    assert pg.claim_session("s1", "c", lease_s=5.0) == token + 2  # a client's claim at once


def test_instances_claiming_at_once_split_the_expired_sessions(pg: StoreBackend) -> None:
    stored_catalogs(pg, "c")
    for i in range(20):
        pg.create_session(f"s{i:02}", catalog_id="c", state=make_state(f"s{i:02}"),
                          is_flat=False, is_auto_approve=False, owner="dead")
    time.sleep(0.7)
    claimed: dict[str, list[str]] = {}

    def claim(owner: str) -> None:
        got: list[str] = []
        while batch := pg.claim_expired(owner, lease_s=30.0, limit=3):
            got += [c.session_id for c in batch]
        claimed[owner] = got

    threads = [threading.Thread(target=claim, args=(f"i{k}",)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    everything = [sid for got in claimed.values() for sid in got]
    assert sorted(everything) == [f"s{i:02}" for i in range(20)]  # each exactly once


def test_a_saved_transition_notifies_every_listener(pg: StoreBackend, pg_url: str) -> None:
    other = open_store(pg_url)
    heard: list[tuple[str, float]] = []
    got = threading.Event()

    def on_session(session_id: str) -> None:
        heard.append((session_id, time.monotonic()))
        got.set()

    listening = other.listen(on_session)
    assert listening is not None
    try:
        time.sleep(0.3)  # LISTEN is in place
        stored_catalogs(pg, "c")
        sent = time.monotonic()
        pg.create_session("s1", catalog_id="c", state=make_state(), is_flat=False,
                          is_auto_approve=False)
        assert got.wait(5), "no notification within 5 s"
        assert heard[0][0] == "s1"
        assert heard[0][1] - sent < 1.0
    finally:
        listening.close()
        other.close()
