"""Two session services (two instances, in one process here) over one real PostgreSQL: the
lease decides who advances a session, a cancel through the other instance fences the worker
off, and an approval through the other instance continues the session there."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from stackroute.bench.fixtures.scripted_engine import ScriptedEngine
from stackroute.bench.reliability.crash_handlers import LOG_ENV, read_log
from stackroute.bench.reliability.crash_plan import CATALOG, HANDLER_MODULE, Job
from stackroute.runtime.errors import StateError
from stackroute.runtime.governance import RunStatus
from stackroute.server.service.catalog_registry import CatalogRegistry
from stackroute.server.service.session_options import SessionOptions
from stackroute.server.service.sessions import SessionService
from stackroute.server.service.store_url import open_store


class Instance:
    def __init__(self, pg_url: str, *, delay_s: float) -> None:
        self.store = open_store(pg_url, lease_s=5.0)
        engine = ScriptedEngine(delay_s=delay_s)
        self.catalogs = CatalogRegistry(self.store, engine,
                                        allowed_handler_modules=(HANDLER_MODULE,))
        self.service = SessionService(self.store, self.catalogs, engine, options=SessionOptions(
            leaf_isolation="thread", allowed_handler_modules=(HANDLER_MODULE,)))

    def close(self) -> None:
        self.service.close()
        self.store.close()


@pytest.fixture
def pair(pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
         ) -> Iterator[tuple[Instance, Instance]]:
    monkeypatch.setenv(LOG_ENV, str(tmp_path / "handlers.jsonl"))
    a, b = Instance(pg_url, delay_s=0.05), Instance(pg_url, delay_s=0.0)
    yield a, b
    a.close()
    b.close()


def _wait(instance: Instance, sid: str, status: RunStatus, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while (row := instance.store.session_row(sid)) is None or row.status is not status:
        assert time.monotonic() < deadline, f"{sid} is {row and row.status}, not {status}"
        time.sleep(0.01)


def test_a_catalog_uploaded_to_one_instance_is_usable_on_the_other(
        pair: tuple[Instance, Instance]) -> None:
    a, b = pair
    entry, is_new = a.catalogs.add_text(json.dumps(CATALOG))
    assert is_new
    assert b.catalogs.get(entry.id).tree.name == CATALOG["name"]  # compiled on first use
    assert [e.id for e in b.catalogs.entries()] == [entry.id]
    a.catalogs.delete(entry.id)
    assert b.catalogs.entries() == []


def test_a_cancel_through_b_fences_off_a_running_worker_on_a(
        pair: tuple[Instance, Instance], tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    a, b = pair
    caplog.set_level(logging.INFO, logger="stackroute.server.service.session_worker")
    catalog_id = a.catalogs.add_text(json.dumps(CATALOG))[0].id
    job = Job(tag="C1", amount=5, plan=("accounts", "statement", "cards", "card_status",
                                        "payments", "domestic", "check_limit"),
              rejects=frozenset(), is_auto_approve=False)
    sid = a.service.create(catalog_id, job.task).row.id
    time.sleep(0.2)  # a few routing calls on A (50 ms each)
    assert b.service.cancel(sid).row.status is RunStatus.CANCELLED
    num_events = len(b.store.transitions(sid))
    time.sleep(0.5)  # A's worker tries its next save, is refused, and drops the session
    assert b.store.session_row(sid).status is RunStatus.CANCELLED  # type: ignore[union-attr]
    assert len(b.store.transitions(sid)) == num_events  # nothing written by A after it
    assert not a.service._live.is_active(sid)
    assert any("is stale" in r.getMessage() and sid in r.getMessage()
               for r in caplog.records), "A's worker was not fenced off"
    ran = [line["leaf"] for line in read_log(tmp_path / "handlers.jsonl")]
    assert len(ran) == len(set(ran))  # no call ran twice


def test_a_session_paused_on_a_is_approved_through_b_and_finishes_there(
        pair: tuple[Instance, Instance], tmp_path: Path) -> None:
    a, b = pair
    catalog_id = a.catalogs.add_text(json.dumps(CATALOG))[0].id
    job = Job(tag="P1", amount=7, plan=("cards", "freeze_card"), rejects=frozenset(),
              is_auto_approve=False)
    sid = a.service.create(catalog_id, job.task).row.id
    _wait(a, sid, RunStatus.PAUSED)
    pending = b.service.get(sid).state.pending
    assert pending is not None and pending.is_gated
    b.service.approve(sid, pending.digest)
    _wait(b, sid, RunStatus.DONE)
    assert [line["leaf"] for line in read_log(tmp_path / "handlers.jsonl")] == ["freeze_card"]
    trace = b.store.transitions(sid)
    assert [e["seq"] for e in trace] == list(range(len(trace)))
    assert any(e["kind"] == "gate_approve" for e in trace)


def test_a_refused_approval_through_b_does_not_keep_the_session_from_a(
        pair: tuple[Instance, Instance], tmp_path: Path) -> None:
    a, b = pair
    catalog_id = a.catalogs.add_text(json.dumps(CATALOG))[0].id
    job = Job(tag="W1", amount=3, plan=("cards", "freeze_card"), rejects=frozenset(),
              is_auto_approve=False)
    sid = a.service.create(catalog_id, job.task).row.id
    _wait(a, sid, RunStatus.PAUSED)
    with pytest.raises(StateError):  # a stale digest: 409, and B lets the lease go
        b.service.approve(sid, "0" * 64)
    pending = a.service.get(sid).state.pending
    assert pending is not None
    started = time.monotonic()
    a.service.approve(sid, pending.digest)  # at once, not after B's lease would expire
    assert time.monotonic() - started < 1.0
    _wait(a, sid, RunStatus.DONE)
    assert [line["leaf"] for line in read_log(tmp_path / "handlers.jsonl")] == ["freeze_card"]
