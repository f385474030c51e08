"""The SQLite store alone: WAL and durability settings, reopening, concurrent writers, an
in-memory database. What every backend must do is in test_store_backends.py."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from stackroute.server.service.store import CatalogRecord, SessionStore, strict_json
from test_store_backends import add_event, make_state, stored_catalogs


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
    stored_catalogs(store, "c")
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
        stored_catalogs(store, "c")
        store.create_session("s1", catalog_id="c", state=make_state(), is_flat=False,
                             is_auto_approve=False)
        assert store.load_session("s1") is not None
    finally:
        store.close()


def test_strict_json_has_no_non_finite_numbers() -> None:
    text = strict_json({"a": [math.inf, -math.inf, math.nan, 1.5], "b": (1, 2), "c": {3}})
    assert json.loads(text) == {"a": [None, None, None, 1.5], "b": [1, 2], "c": "{3}"}
