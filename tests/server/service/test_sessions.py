"""Sessions (tier b): the stack machine in background workers against a plan-following engine,
persisted at every transition; gates, restarts, a real SIGKILL mid-run, event streams."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from doubles import PlanEngine
from session_kit import BANK_CATALOG, executions, logging_handlers, wait_for_status
from stackroute.runtime.errors import InputError, StateError
from stackroute.runtime.governance import RunStatus
from stackroute.runtime.handlers import LocalExecutor
from stackroute.runtime.trace import EventKind
from stackroute.runtime.usage import Usage
from stackroute.server.service.catalog_registry import CatalogRegistry
from stackroute.server.service.session_events import StreamEnd, UnknownSessionError
from stackroute.server.service.session_options import SessionOptions
from stackroute.server.service.sessions import SessionsBusyError, SessionService
from stackroute.server.service.store import SessionStore
from stackroute.server.service.store_executor import StoreExecutor

HERE = Path(__file__).resolve().parent


class Service:
    """A store, a catalog registry and a session service over one database file."""

    def __init__(self, db: Path, log: Path, engine: PlanEngine | None = None,
                 options: SessionOptions | None = None) -> None:
        self.store = SessionStore(db)
        self.engine = engine or PlanEngine()
        self.catalogs = CatalogRegistry(self.store, self.engine)
        self.catalogs.load_persisted()
        self.catalog_id = self.catalogs.add_text(json.dumps(BANK_CATALOG))[0].id
        self.routing_calls: list[tuple[str, Usage]] = []
        # In-process handlers (closures that log): threads, not the product's processes.
        options = options or SessionOptions()
        self.sessions = SessionService(
            self.store, self.catalogs, self.engine,
            options=replace(options, leaf_isolation="thread"),
            handlers=logging_handlers(log),
            on_routing_call=lambda outcome, usage: self.routing_calls.append((outcome, usage)))

    def close(self) -> None:
        self.sessions.close()
        self.store.close()


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "handlers.jsonl"


@pytest.fixture
def service(tmp_path: Path, log: Path) -> Iterator[Service]:
    svc = Service(tmp_path / "stackroute.db", log)
    yield svc
    svc.close()


def kinds(trace: list[Any]) -> list[str]:
    return [e.kind.value for e in trace]


def paused_session(svc: Service, task: str = "Send 5 to Asha") -> str:
    record = svc.sessions.create(svc.catalog_id, task)
    assert wait_for_status(svc.store, record.row.id) is RunStatus.PAUSED
    return record.row.id


def test_a_session_pauses_at_the_gate_and_runs_once_approved(service: Service,
                                                             log: Path) -> None:
    sid = paused_session(service)
    paused = service.sessions.get(sid)
    pending = paused.state.pending
    assert pending is not None and pending.is_gated
    assert pending.path == "payments/send_money"
    assert pending.arguments == {"payee": "Asha", "amount": 5}
    assert executions(log) == []

    before = paused.state.to_dict()
    with pytest.raises(StateError, match="another call"):
        service.sessions.approve(sid, "0" * 32)
    assert service.sessions.get(sid).state.to_dict() == before  # nothing changed

    service.sessions.approve(sid, pending.digest)
    assert wait_for_status(service.store, sid) is RunStatus.DONE
    done = service.sessions.get(sid).state
    assert executions(log) == [{"leaf": "send_money",
                                "arguments": {"payee": "Asha", "amount": 5}}]
    assert kinds(done.trace) == [
        "start", "route", "push", "route", "leaf_pending", "gate_pause", "gate_approve",
        "leaf_result", "route", "pop_done", "route", "finish"]
    assert [e.seq for e in done.trace] == list(range(len(done.trace)))
    assert done.calls == [{"path": "payments/send_money",
                           "arguments": {"payee": "Asha", "amount": 5},
                           "result": {"ok": True, "leaf": "send_money", "payee": "Asha",
                                      "amount": 5},
                           "call_id": f"{sid}:0",
                           # PlanEngine answers value menus outside them: written, not taken
                           "written_values": ["payee"]}]
    assert [o for o, _ in service.routing_calls] == ["router", "leaf", "done", "done"]
    with pytest.raises(StateError, match="done"):
        service.sessions.approve(sid, pending.digest)


def test_reject_skips_the_call(service: Service, log: Path) -> None:
    sid = paused_session(service)
    pending = service.sessions.get(sid).state.pending
    assert pending is not None
    service.sessions.reject(sid, pending.digest)
    assert wait_for_status(service.store, sid) is RunStatus.DONE
    state = service.sessions.get(sid).state
    assert executions(log) == []
    assert "gate_reject" in kinds(state.trace) and "leaf_result" not in kinds(state.trace)
    assert state.result == [{"path": "payments", "output": [
        {"path": "payments/send_money", "arguments": {"payee": "Asha", "amount": 5},
         "rejected": True}]}]


def test_auto_approve_runs_through_the_gate(service: Service, log: Path) -> None:
    record = service.sessions.create(service.catalog_id, "Send 5 to Asha",
                                     is_auto_approve=True)
    assert wait_for_status(service.store, record.row.id) is RunStatus.DONE
    assert len(executions(log)) == 1
    assert "gate_approve" in kinds(service.sessions.get(record.row.id).state.trace)


def test_cancel_a_paused_session(service: Service, log: Path) -> None:
    sid = paused_session(service)
    digest = service.sessions.get(sid).state.pending.digest  # type: ignore[union-attr]
    cancelled = service.sessions.cancel(sid)
    assert cancelled.row.status is RunStatus.CANCELLED
    assert cancelled.state.pending is None
    assert kinds(cancelled.state.trace)[-1] == "cancel"
    with pytest.raises(StateError):
        service.sessions.approve(sid, digest)
    with pytest.raises(StateError):
        service.sessions.cancel(sid)
    assert executions(log) == []


def test_unknown_ids_and_bad_input(service: Service) -> None:
    with pytest.raises(UnknownSessionError):
        service.sessions.get("nope")
    with pytest.raises(UnknownSessionError):
        service.sessions.approve("nope", "x")
    with pytest.raises(UnknownSessionError):
        service.sessions.events("nope")
    with pytest.raises(InputError, match="unknown limit"):
        service.sessions.create(service.catalog_id, "x", limits={"max_stepz": 3})
    with pytest.raises(InputError, match="empty"):
        service.sessions.create(service.catalog_id, "  ")
    with pytest.raises(InputError, match="no catalog"):
        service.sessions.create("missing-123", "x")


def test_session_steps_are_capped_by_the_server(tmp_path: Path, log: Path) -> None:
    svc = Service(tmp_path / "db.sqlite", log, options=SessionOptions(max_session_steps=10))
    try:
        with pytest.raises(InputError, match="max_session_steps 10"):
            svc.sessions.create(svc.catalog_id, "x", limits={"max_steps": 11})
        record = svc.sessions.create(svc.catalog_id, "Send 5 to Asha",
                                     limits={"max_steps": 1, "max_depth": 4})
        assert record.state.limits.max_steps == 1 and record.state.limits.max_depth == 4
        other = svc.sessions.create(svc.catalog_id, "Send 5 to Asha")
        assert other.state.limits.max_steps == 10  # the default 32, capped
        assert wait_for_status(svc.store, record.row.id) is RunStatus.LIMIT
    finally:
        svc.close()


def test_a_restarted_service_lists_and_resumes_a_paused_session(tmp_path: Path,
                                                                log: Path) -> None:
    db = tmp_path / "stackroute.db"
    first = Service(db, log)
    sid = paused_session(first)
    first.close()

    second = Service(db, log)
    try:
        assert second.engine.prepared == ["Bank Tools"]  # compiled again at load, once
        assert [r.id for r in second.sessions.list_sessions(status=RunStatus.PAUSED)] == [sid]
        assert second.sessions.resume_interrupted() == []  # paused stays paused
        assert second.store.session_row(sid).status is RunStatus.PAUSED  # type: ignore[union-attr]
        pending = second.sessions.get(sid).state.pending
        assert pending is not None
        second.sessions.approve(sid, pending.digest)
        assert wait_for_status(second.store, sid) is RunStatus.DONE
        assert len(executions(log)) == 1
    finally:
        second.close()


def test_a_session_killed_after_its_leaf_ran_resumes_without_running_it_again(
        tmp_path: Path, log: Path) -> None:
    db = tmp_path / "stackroute.db"
    kits = os.pathsep.join(filter(None, [str(HERE.parent), os.environ.get("PYTHONPATH")]))
    child = subprocess.run([sys.executable, str(HERE / "session_crash_child.py"), str(db),
                            str(log)], capture_output=True, text=True, timeout=60,
                           env={**os.environ, "PYTHONPATH": kits})  # session_kit's folder
    assert child.returncode == -signal.SIGKILL, child.stderr
    assert len(executions(log)) == 1  # the handler ran before the kill

    store = SessionStore(db)
    [row] = store.list_sessions()
    assert row.status is RunStatus.RUNNING
    crashed = store.load_session(row.id)
    assert crashed is not None and crashed.state.pending is not None  # result never saved
    execution = store.leaf_execution(crashed.state.pending.call_id)
    assert execution is not None and execution.is_finished
    store.close()

    svc = Service(db, log)
    try:
        assert svc.sessions.resume_interrupted() == [row.id]
        assert wait_for_status(svc.store, row.id) is RunStatus.DONE
        assert len(executions(log)) == 1  # exactly once
        state = svc.sessions.get(row.id).state
        [result] = [e for e in state.trace if e.kind is EventKind.LEAF_RESULT]
        assert result.detail["is_replayed"] is True
        assert result.detail["result"] == {"ok": True, "leaf": "send_money", "payee": "Asha",
                                           "amount": 5}
        assert [e.seq for e in state.trace] == list(range(len(state.trace)))
    finally:
        svc.close()


def test_store_executor_never_runs_a_call_twice(service: Service, log: Path) -> None:
    tree = service.catalogs.get(service.catalog_id).tree
    leaf = tree.node("payments/send_money")
    executor = StoreExecutor(service.store, LocalExecutor(logging_handlers(log)))
    args = {"payee": "Asha", "amount": 5}
    first = executor.execute(leaf, args, "run:0")
    again = executor.execute(leaf, args, "run:0")
    assert not first.is_replayed and again.is_replayed
    assert again.result == first.result and len(executions(log)) == 1
    other = executor.execute(leaf, {"payee": "Bo", "amount": 1}, "run:0")
    assert other.error is not None and "another call" in other.error
    # Begun but never finished (killed inside the handler): reported, not run again.
    service.store.begin_leaf("run:1", path=leaf.path_str,
                             digest=executor.store.leaf_execution("run:0").digest)  # type: ignore[union-attr]
    interrupted = executor.execute(leaf, args, "run:1")
    assert interrupted.error is not None and "interrupted" in interrupted.error
    assert len(executions(log)) == 1


def test_an_engine_failure_ends_the_session_with_an_error(tmp_path: Path, log: Path) -> None:
    svc = Service(tmp_path / "db.sqlite", log, engine=PlanEngine(fail_at="send_money"))
    try:
        record = svc.sessions.create(svc.catalog_id, "Send 5 to Asha")
        assert wait_for_status(svc.store, record.row.id) is RunStatus.ERROR
        state = svc.sessions.get(record.row.id).state
        assert state.error == "RuntimeError: engine failure at send_money"
        assert state.trace[-1].kind is EventKind.FINISH
        assert state.trace[-1].detail["status"] == "error"
    finally:
        svc.close()


def test_too_many_running_sessions_is_refused(tmp_path: Path, log: Path) -> None:
    gate = threading.Event()
    svc = Service(tmp_path / "db.sqlite", log, engine=PlanEngine(gate=gate),
                  options=SessionOptions(max_active=1))
    try:
        first = svc.sessions.create(svc.catalog_id, "Send 5 to Asha")
        with pytest.raises(SessionsBusyError) as refused:
            svc.sessions.create(svc.catalog_id, "Send 5 to Asha")
        assert refused.value.retry_after_s >= 1
        gate.set()
        assert wait_for_status(svc.store, first.row.id) is RunStatus.PAUSED
        svc.sessions.create(svc.catalog_id, "Send 5 to Asha")  # room again
    finally:
        gate.set()
        svc.close()


def test_cancel_while_running_stops_after_the_current_step(tmp_path: Path, log: Path) -> None:
    gate = threading.Event()
    svc = Service(tmp_path / "db.sqlite", log, engine=PlanEngine(gate=gate))
    try:
        record = svc.sessions.create(svc.catalog_id, "Send 5 to Asha")
        cancelling = threading.Thread(target=svc.sessions.cancel, args=(record.row.id,))
        cancelling.start()
        gate.set()
        cancelling.join(timeout=10)
        assert wait_for_status(svc.store, record.row.id) is RunStatus.CANCELLED
        assert kinds(svc.sessions.get(record.row.id).state.trace)[-1] == "cancel"
    finally:
        gate.set()
        svc.close()


def collect(svc: Service, session_id: str, after_seq: int = -1) -> list[Any]:
    async def run() -> list[Any]:
        return [item async for item in svc.sessions.events(session_id, after_seq=after_seq)]

    return asyncio.run(asyncio.wait_for(run(), timeout=10))


def test_event_stream_follows_the_run_and_ends_when_it_stops(service: Service) -> None:
    gate = threading.Event()
    service.engine.gate = gate
    record = service.sessions.create(service.catalog_id, "Send 5 to Asha")
    threading.Timer(0.2, gate.set).start()
    items = collect(service, record.row.id)
    assert items[-1] == StreamEnd(RunStatus.PAUSED)
    events = items[:-1]
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert events[-1]["kind"] == "gate_pause"
    assert service.sessions._watchers._waiters == {}  # the watcher unregistered itself

    pending = service.sessions.get(record.row.id).state.pending
    assert pending is not None
    service.sessions.approve(record.row.id, pending.digest)
    rest = collect(service, record.row.id, after_seq=events[-1]["seq"])
    assert rest[0]["kind"] == "gate_approve" and rest[-1] == StreamEnd(RunStatus.DONE)
    assert rest[-2]["kind"] == "finish"


def test_an_abandoned_event_stream_unregisters(service: Service) -> None:
    gate = threading.Event()
    service.engine.gate = gate
    record = service.sessions.create(service.catalog_id, "Send 5 to Asha")

    async def first_item() -> Any:
        stream = service.sessions.events(record.row.id)
        item = await anext(stream)
        assert service.sessions._watchers._waiters
        await stream.aclose()
        return item

    try:
        assert asyncio.run(first_item())["kind"] == "start"
        assert service.sessions._watchers._waiters == {}
    finally:
        gate.set()
