"""Issue 28, findings 2, 4 and 7 (store side), on a real PostgreSQL: the fencing token a claim
returns is the one everything after it uses; the keeper renews on its own schedule; a deleted
catalog is refused on every instance; a claimant that cannot load a catalog releases the
session; a leaf error text holding NUL is stored.

Each interleaving is forced, not hoped for: a store wrapper runs the other instance's move
right after this instance's claim, before it loads the session (the window the finding names).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from stackroute.bench.fixtures.scripted_engine import ScriptedEngine
from stackroute.bench.reliability.crash_handlers import LOG_ENV, read_log
from stackroute.bench.reliability.crash_plan import CATALOG, HANDLER_MODULE, Job
from stackroute.runtime.governance import Limits, RunStatus
from stackroute.runtime.handlers import HandlerTable
from stackroute.server.routing.router import build_machine
from stackroute.server.service.catalog_registry import CatalogRegistry, UnknownCatalogError
from stackroute.server.service.session_leases import LeaseKeeper
from stackroute.server.service.session_options import SessionOptions
from stackroute.server.service.sessions import SessionService
from stackroute.server.service.store_protocol import StoreBackend
from stackroute.server.service.store_url import open_store

LEASE_S = 0.6


class HookedStore:
    """The real store, with a hook run right after `claim_expired` returns (the forced
    interleaving: another instance moves between this one's claim and its load)."""

    def __init__(self, inner: StoreBackend) -> None:
        self._inner = inner
        self.after_claim: Callable[[], None] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def claim_expired(self, owner: str, *, lease_s: float, limit: int) -> Any:
        claimed = self._inner.claim_expired(owner, lease_s=lease_s, limit=limit)
        hook, self.after_claim = self.after_claim, None
        if claimed and hook is not None:
            hook()
        return claimed


class Instance:
    def __init__(self, pg_url: str, *, delay_s: float = 0.0, lease_s: float = LEASE_S,
                 allowed: tuple[str, ...] = (HANDLER_MODULE,),
                 handlers: HandlerTable | None = None) -> None:
        self.store = HookedStore(open_store(pg_url, lease_s=lease_s))
        self.engine = ScriptedEngine(delay_s=delay_s)
        self.catalogs = CatalogRegistry(self.store, self.engine,  # type: ignore[arg-type]
                                        allowed_handler_modules=allowed)
        self.service = SessionService(
            self.store, self.catalogs, self.engine,  # type: ignore[arg-type]
            handlers=handlers, options=SessionOptions(
                leaf_isolation="thread", allowed_handler_modules=allowed))

    def close(self) -> None:
        self.service.close()
        self.store.close()


@pytest.fixture
def log_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "handlers.jsonl"
    monkeypatch.setenv(LOG_ENV, str(path))
    return path


@pytest.fixture
def instances(pg_url: str, log_path: Path) -> Iterator[Callable[..., Instance]]:
    made: list[Instance] = []

    def make(**kwargs: Any) -> Instance:
        made.append(Instance(pg_url, **kwargs))
        return made[-1]

    yield make
    for instance in made:
        instance.close()


def _wait(store: Any, sid: str, status: RunStatus, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while (row := store.session_row(sid)) is None or row.status is not status:
        assert time.monotonic() < deadline, f"{sid} is {row and row.status}, not {status}"
        time.sleep(0.01)


def _orphan(instance: Instance, catalog_id: str, job: Job, sid: str) -> None:
    """A running session left by an instance that died (its lease already expired)."""
    entry = instance.catalogs.get(catalog_id)
    machine = build_machine(entry.tree, instance.engine, limits=Limits())
    state = machine.start(job.task, run_id=sid)
    instance.store.create_session(sid, catalog_id=catalog_id, state=state, is_flat=False,
                                  is_auto_approve=True, owner="dead-instance")
    time.sleep(LEASE_S + 0.1)


JOB = Job(tag="T1", amount=5, plan=("payments", "domestic", "check_limit", "send_transfer"),
          rejects=frozenset(), is_auto_approve=True)


def test_a_takeover_keeps_the_token_its_claim_returned(
        instances: Callable[..., Instance], log_path: Path) -> None:
    """Finding 2: A claims (token 2) and, before A loads the session, its claim lapses and B
    claims it (token 3) and finishes it. A must load with token 2, so none of its writes
    land; before, A re-read the token (3, B's) and marked B's finished session `error`."""
    a, b = instances(), instances()
    catalog_id = a.catalogs.add_text(json.dumps(CATALOG))[0].id
    _orphan(a, catalog_id, JOB, "s-token")

    def b_moves() -> None:  # A's claim lapses (a slow takeover), B claims and finishes
        time.sleep(LEASE_S + 0.1)
        assert b.service.resume_interrupted() == ["s-token"]
        _wait(b.store, "s-token", RunStatus.DONE)

    a.store.after_claim = b_moves
    a.service.resume_interrupted()
    time.sleep(0.3)  # A's worker (if it got one) tries its writes
    record = b.service.get("s-token")
    assert record.row.status is RunStatus.DONE, record.state.error
    assert not [e for e in record.state.trace if e.error], "an error was committed"
    ran = [line["leaf"] for line in read_log(log_path)]
    assert sorted(ran) == ["check_limit", "send_transfer"]  # each once


def test_claim_expired_returns_each_session_with_its_token(
        instances: Callable[..., Instance]) -> None:
    a = instances()
    catalog_id = a.catalogs.add_text(json.dumps(CATALOG))[0].id
    _orphan(a, catalog_id, JOB, "s-claim")
    claims = a.store.claim_expired("me", lease_s=5.0, limit=10)
    assert [(c.session_id, c.token) for c in claims] == [
        ("s-claim", a.store.lease_token("s-claim"))]


def test_the_keeper_renews_while_a_takeover_runs_longer_than_the_lease(
        instances: Callable[..., Instance]) -> None:
    """Finding 2: renewal waited for a whole takeover, so a takeover longer than the lease
    let this instance's own leases lapse and another instance claimed them."""
    a = instances()
    catalog_id = a.catalogs.add_text(json.dumps(CATALOG))[0].id
    machine = build_machine(a.catalogs.get(catalog_id).tree, a.engine, limits=Limits())
    state = machine.start(JOB.task, run_id="s-held")
    a.store.create_session("s-held", catalog_id=catalog_id, state=state, is_flat=False,
                           is_auto_approve=True, owner="a")
    is_taking_over = threading.Event()

    def slow_take_over() -> None:
        is_taking_over.set()
        time.sleep(4 * LEASE_S)

    keeper = LeaseKeeper(a.store, "a", lease_s=LEASE_S, take_over=slow_take_over)
    keeper.start()
    try:
        assert is_taking_over.wait(5)
        deadline = time.monotonic() + 3 * LEASE_S
        while time.monotonic() < deadline:
            assert a.store.claim_expired("b", lease_s=5.0, limit=10) == [], \
                "another instance took over a lease its keeper should have renewed"
            time.sleep(LEASE_S / 6)
    finally:
        keeper.close()


def test_a_failed_load_does_not_overwrite_a_session_another_instance_cancelled(
        instances: Callable[..., Instance]) -> None:
    """Finding 2: `_fail_stored` read a fresh token, so a claimant that could not load the
    session overwrote B's cancel with `error`. Now the claimant releases it (finding 4), and
    under its own claim's token, which B's cancel made stale."""
    a = instances()
    b = instances(allowed=())  # B cannot load the catalog: another handler allowlist
    catalog_id = a.catalogs.add_text(json.dumps(CATALOG))[0].id
    _orphan(a, catalog_id, JOB, "s-cancel")
    b.store.after_claim = lambda: a.service.cancel("s-cancel") and None
    b.service.resume_interrupted()
    row = a.store.session_row("s-cancel")
    assert row is not None and row.status is RunStatus.CANCELLED


def test_a_claimant_that_cannot_load_the_catalog_releases_the_session(
        instances: Callable[..., Instance], log_path: Path) -> None:
    """Finding 4: an instance with another handler allowlist (or mid rolling upgrade) marked
    other instances' sessions `error`; it must let them go to one that can run them."""
    a = instances(allowed=())
    catalog_id = instances().catalogs.add_text(json.dumps(CATALOG))[0].id
    other = instances()
    _orphan(other, catalog_id, JOB, "s-release")
    assert a.service.resume_interrupted() == []
    row = a.store.session_row("s-release")
    assert row is not None and row.status is RunStatus.RUNNING
    time.sleep(LEASE_S + 0.1)  # a released session waits one lease before the next takeover
    assert other.service.resume_interrupted() == ["s-release"]
    _wait(other.store, "s-release", RunStatus.DONE)
    assert sorted(line["leaf"] for line in read_log(log_path)) == ["check_limit",
                                                                   "send_transfer"]


def test_an_instance_refuses_sessions_on_a_catalog_another_instance_deleted(
        instances: Callable[..., Instance]) -> None:
    """Finding 4: A had the catalog in memory and kept creating sessions on it."""
    a, b = instances(), instances()
    catalog_id = a.catalogs.add_text(json.dumps(CATALOG))[0].id
    b.catalogs.delete(catalog_id)
    with pytest.raises(UnknownCatalogError):
        a.service.create(catalog_id, JOB.task)
    assert a.store.list_sessions() == []
    assert catalog_id not in [e.id for e in a.catalogs.entries()]


def test_a_leaf_error_holding_nul_is_stored_and_the_call_finished(
        instances: Callable[..., Instance]) -> None:
    """Finding 7 (store side): PostgreSQL refuses NUL in text, so `finish_leaf` failed and
    left the call begun (a resume then reported it as possibly run)."""
    def boom(**arguments: Any) -> None:
        raise ValueError("bad\x00byte")

    handlers = HandlerTable({"payments/domestic/check_limit": boom})
    a = instances(handlers=handlers)
    catalog_id = a.catalogs.add_text(json.dumps(CATALOG))[0].id
    job = Job(tag="N1", amount=1, plan=("payments", "domestic", "check_limit"),
              rejects=frozenset(), is_auto_approve=True)
    sid = a.service.create(catalog_id, job.task, is_auto_approve=True).row.id
    _wait(a.store, sid, RunStatus.DONE)
    calls = a.service.get(sid).state.calls
    assert len(calls) == 1 and "\x00" not in (calls[0]["error"] or "")
    assert "bad" in calls[0]["error"] and "byte" in calls[0]["error"]
    execution = a.store.leaf_execution(calls[0]["call_id"])
    assert execution is not None and execution.is_finished
    assert execution.error == calls[0]["error"]  # a replay returns what the run saw
