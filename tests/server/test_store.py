"""The SQLite store: WAL and durability settings, round trips, atomic steps, idempotency rows."""

from __future__ import annotations

import json
import math
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from stackroute.runtime.governance import Limits, RunStatus
from stackroute.runtime.messages import Message
from stackroute.runtime.state import RunState
from stackroute.runtime.trace import EventKind, TraceEvent
from stackroute.server.service.store import CatalogRecord, SessionStore, strict_json


def make_state(run_id: str = "s1", *, num_events: int = 2) -> RunState:
    state = RunState(run_id=run_id, catalog="bank", conversation=[Message("user", "hi")],
                     limits=Limits(max_steps=7))
    for _ in range(num_events):
        add_event(state)
    return state


def add_event(state: RunState) -> TraceEvent:
    event = TraceEvent(seq=len(state.trace), kind=EventKind.ROUTE, frame_id=0, parent_id=None,
                       path="", decision="payments", menu=("payments", "DONE"),
                       probabilities={"payments": 0.75, "DONE": 0.25}, time_unix=1.0)
    state.trace.append(event)
    return event


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SessionStore]:
    s = SessionStore(tmp_path / "db" / "stackroute.db")
    yield s
    s.close()


def test_file_database_uses_wal_and_full_sync(store: SessionStore) -> None:
    assert store.journal_mode == "wal"
    assert store.pragma("journal_mode") == "wal"
    assert store.pragma("synchronous") == 2  # FULL
    assert store.pragma("user_version") == 1


def test_catalogs_round_trip_and_same_id_is_kept_once(store: SessionStore) -> None:
    record = CatalogRecord(id="bank-1", name="bank", source="{}", format="json",
                           created_unix=5.0)
    assert store.put_catalog(record) is True
    assert store.put_catalog(record) is False
    assert store.catalogs() == [record]
    assert store.delete_catalog("bank-1") is True
    assert store.delete_catalog("bank-1") is False
    assert store.catalogs() == []


def test_session_state_and_trace_round_trip(store: SessionStore) -> None:
    state = make_state()
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
    # The state column holds no trace: the transitions table is its only copy.
    raw = store._query("SELECT state FROM sessions WHERE id = 's1'")[0][0]
    assert json.loads(raw)["trace"] == []


def test_a_step_is_atomic(store: SessionStore) -> None:
    state = make_state()
    store.create_session("s1", catalog_id="c", state=state, is_flat=False,
                         is_auto_approve=False)
    state.num_steps = 99
    state.status = RunStatus.DONE
    with pytest.raises(sqlite3.IntegrityError):  # seq 1 is already stored
        store.save_step("s1", state, state.trace[1:])
    record = store.load_session("s1")
    assert record is not None
    assert record.state.num_steps == 0 and record.row.status is RunStatus.RUNNING
    assert len(record.state.trace) == 2


def test_list_filters_and_counts(store: SessionStore) -> None:
    for i, status in enumerate([RunStatus.RUNNING, RunStatus.PAUSED, RunStatus.DONE]):
        state = make_state(f"s{i}")
        state.status = status
        store.create_session(f"s{i}", catalog_id="a" if i < 2 else "b", state=state,
                             is_flat=False, is_auto_approve=False)
    assert [r.id for r in store.list_sessions()] == ["s0", "s1", "s2"]
    assert [r.id for r in store.list_sessions(status=RunStatus.PAUSED)] == ["s1"]
    assert [r.id for r in store.list_sessions(catalog_id="b")] == ["s2"]
    assert [r.id for r in store.list_sessions(limit=1, offset=1)] == ["s1"]
    assert store.count_active_sessions("a") == 2
    assert store.count_active_sessions("b") == 0
    assert store.count_by_status() == {"running": 1, "paused": 1, "done": 1}


def test_leaf_execution_rows(store: SessionStore) -> None:
    assert store.leaf_execution("s1:0") is None
    store.begin_leaf("s1:0", path="payments/send_money", digest="abc")
    begun = store.leaf_execution("s1:0")
    assert begun is not None and not begun.is_finished and begun.result is None
    store.finish_leaf("s1:0", result={"sent": 5, "ratio": math.inf}, error=None)
    done = store.leaf_execution("s1:0")
    assert done is not None and done.is_finished
    assert done.result == {"sent": 5, "ratio": None}  # strict JSON: no Infinity
    with pytest.raises(sqlite3.IntegrityError):
        store.begin_leaf("s1:0", path="payments/send_money", digest="abc")
    with pytest.raises(KeyError):
        store.finish_leaf("never-begun", result=None, error="x")


def test_data_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "stackroute.db"
    first = SessionStore(path)
    first.put_catalog(CatalogRecord(id="c", name="c", source="{}", format="json",
                                    created_unix=1.0))
    first.create_session("s1", catalog_id="c", state=make_state(), is_flat=True,
                         is_auto_approve=False)
    first.close()
    second = SessionStore(path)
    try:
        assert [c.id for c in second.catalogs()] == ["c"]
        record = second.load_session("s1")
        assert record is not None and record.row.is_flat and len(record.state.trace) == 2
    finally:
        second.close()


def test_concurrent_writers_do_not_interleave(store: SessionStore) -> None:
    num_threads, num_steps = 8, 25
    states = {f"s{i}": make_state(f"s{i}", num_events=0) for i in range(num_threads)}
    for sid, state in states.items():
        store.create_session(sid, catalog_id="c", state=state, is_flat=False,
                             is_auto_approve=False)

    def run(sid: str) -> None:
        state = states[sid]
        for step in range(num_steps):
            event = add_event(state)
            state.num_steps = step + 1
            store.save_step(sid, state, [event])
            assert store.load_session(sid) is not None

    threads = [threading.Thread(target=run, args=(sid,)) for sid in states]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for sid in states:
        record = store.load_session(sid)
        assert record is not None and record.state.num_steps == num_steps
        assert [e.seq for e in record.state.trace] == list(range(num_steps))


def test_in_memory_database_works_without_wal() -> None:
    store = SessionStore()
    try:
        assert store.journal_mode == "memory"
        store.create_session("s1", catalog_id="c", state=make_state(), is_flat=False,
                             is_auto_approve=False)
        assert store.load_session("s1") is not None
    finally:
        store.close()


def test_strict_json_has_no_non_finite_numbers() -> None:
    text = strict_json({"a": [math.inf, -math.inf, math.nan, 1.5], "b": (1, 2), "c": {3}})
    assert json.loads(text) == {"a": [None, None, None, 1.5], "b": [1, 2], "c": "{3}"}
