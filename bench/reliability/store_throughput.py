"""Session throughput by store: SQLite (embedded, one process) vs PostgreSQL (shared), the
same service and workload, so the store is what differs.

    stackroute bench store-throughput [--smoke] \
        [--concurrency 1 8 32] [--db URL]

Each variant runs an in-process `SessionService` over the store with the scripted engine at
zero delay (no model: a routing call costs microseconds) and the crash harness's catalog and
recording handlers; every job is auto-approved, so a session runs start to finish without a
client. `concurrency` sessions are kept in flight (and as many workers), until `num_sessions`
are done. Reported per (store, concurrency): sessions/s, transitions/s, and per transition
the store's save (`save_ms`: state + trace events in one transaction) and the whole
transition (`transition_ms`: from one saved transition of a session to its next, the step
included), p50 and p99; then PostgreSQL/SQLite ratios at each concurrency.

Both stores are durable: SQLite fsyncs every commit (synchronous=FULL) and the PostgreSQL
cluster (a throwaway local one unless --db) runs with fsync on. PostgreSQL is reached over
loopback TCP through the store's pool (10 connections).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from stackroute.bench.environment import environment
from stackroute.bench.fixtures.scripted_engine import ScriptedEngine
from stackroute.bench.reliability.crash_handlers import LOG_ENV
from stackroute.bench.reliability.crash_plan import CATALOG, HANDLER_MODULE, catalog_tree, make_job
from stackroute.runtime.state import RunState
from stackroute.runtime.trace import TraceEvent
from stackroute.server.service.catalog_registry import CatalogRegistry
from stackroute.server.service.session_options import SessionOptions
from stackroute.server.service.sessions import SessionService
from stackroute.server.service.store_protocol import StoreBackend
from stackroute.server.service.store_url import open_store

CONCURRENCY = (1, 8, 32)


class _TimedStore:
    """The store, with each save timed and each session's end signalled (no polling)."""

    def __init__(self, inner: StoreBackend) -> None:
        self._inner = inner
        self.save_s: list[float] = []
        self.transition_s: list[float] = []
        self._last: dict[str, float] = {}
        self._lock = threading.Lock()
        self.finished: set[str] = set()
        self.changed = threading.Condition(self._lock)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def save_step(self, session_id: str, state: RunState, events: Sequence[TraceEvent], *,
                  token: int | None = None) -> None:
        started = time.perf_counter()
        self._inner.save_step(session_id, state, events, token=token)
        done = time.perf_counter()
        with self._lock:
            self.save_s.append(done - started)
            last = self._last.get(session_id)
            if last is not None:
                self.transition_s.append(done - last)
            self._last[session_id] = done
            if state.status.is_final:
                self.finished.add(session_id)
                self.changed.notify_all()


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else 0.0


def run_variant(db: str, *, concurrency: int, num_sessions: int, seed: int = 0
                ) -> dict[str, Any]:
    store = _TimedStore(open_store(db, lease_s=30.0))
    engine = ScriptedEngine(delay_s=0)
    catalogs = CatalogRegistry(store, engine,  # type: ignore[arg-type]
                               allowed_handler_modules=(HANDLER_MODULE,))
    catalog_id = catalogs.add_text(json.dumps(CATALOG))[0].id
    options = SessionOptions(max_workers=concurrency, max_active=concurrency * 2,
                             leaf_isolation="thread", allowed_handler_modules=(HANDLER_MODULE,),
                             max_session_steps=None)
    service = SessionService(store, catalogs, engine, options=options)  # type: ignore[arg-type]
    rng, tree = random.Random(seed), catalog_tree()
    jobs = [replace(make_job(rng, i, tree), is_auto_approve=True) for i in range(num_sessions)]
    started = time.perf_counter()
    created: list[str] = []
    try:
        for job in jobs:
            with store.changed:  # keep `concurrency` sessions in flight
                store.changed.wait_for(
                    lambda: len(created) - len(store.finished) < concurrency, timeout=120)
            created.append(service.create(catalog_id, job.task, is_auto_approve=True).row.id)
        with store.changed:
            if not store.changed.wait_for(lambda: len(store.finished) >= len(created),
                                          timeout=600):
                raise TimeoutError(f"{len(created) - len(store.finished)} sessions unfinished")
        elapsed_s = time.perf_counter() - started
        statuses = service.count_by_status()
    finally:
        service.close()
        store.close()
    num_transitions = len(store.save_s) + num_sessions  # + each session's first save
    return {"store": "postgresql" if db.startswith("postgresql") else "sqlite",
            "concurrency": concurrency, "sessions": num_sessions, "statuses": statuses,
            "transitions": num_transitions, "elapsed_s": round(elapsed_s, 3),
            "sessions_per_s": round(num_sessions / elapsed_s, 2),
            "transitions_per_s": round(num_transitions / elapsed_s, 1),
            "save_ms_p50": round(_pct(store.save_s, 0.5), 2),
            "save_ms_p99": round(_pct(store.save_s, 0.99), 2),
            "transition_ms_p50": round(_pct(store.transition_s, 0.5), 2),
            "transition_ms_p99": round(_pct(store.transition_s, 0.99), 2)}


def run(pg_url: str, workdir: Path, *, levels: Sequence[int], sessions_per_worker: int,
        min_sessions: int) -> dict[str, Any]:
    rows = []
    for concurrency in levels:
        num_sessions = max(min_sessions, sessions_per_worker * concurrency)
        for db in (str(workdir / f"c{concurrency}.db"), pg_url):
            if db.startswith("postgresql"):
                _reset(pg_url)
            row = run_variant(db, concurrency=concurrency, num_sessions=num_sessions)
            print(json.dumps(row), file=sys.stderr, flush=True)
            rows.append(row)
    ratios = []
    for concurrency in levels:
        sq, pg = (next(r for r in rows if r["store"] == s and r["concurrency"] == concurrency)
                  for s in ("sqlite", "postgresql"))
        ratios.append({"concurrency": concurrency,
                       "sessions_per_s_pg_over_sqlite": round(
                           pg["sessions_per_s"] / sq["sessions_per_s"], 2),
                       "transition_ms_p50_pg_over_sqlite": round(
                           pg["transition_ms_p50"] / max(sq["transition_ms_p50"], 1e-9), 2),
                       "transition_ms_p99_pg_over_sqlite": round(
                           pg["transition_ms_p99"] / max(sq["transition_ms_p99"], 1e-9), 2)})
    return {"rows": rows, "ratios": ratios, "environment": environment(),
            "load_avg_1m": os.getloadavg()[0]}


def _reset(pg_url: str) -> None:
    """An empty database for each PostgreSQL variant, as each SQLite one gets a new file."""
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DROP SCHEMA public CASCADE")
        conn.execute("CREATE SCHEMA public")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="concurrency 1 and 4, few sessions")
    parser.add_argument("--concurrency", type=int, nargs="+", default=list(CONCURRENCY))
    parser.add_argument("--sessions-per-worker", type=int, default=4)
    parser.add_argument("--min-sessions", type=int, default=16)
    parser.add_argument("--db", default=None, help="postgresql:// URL of an empty database "
                                                   "(default: a throwaway durable cluster)")
    args = parser.parse_args(argv)
    levels = [1, 4] if args.smoke else args.concurrency
    per_worker, minimum = (2, 4) if args.smoke else (args.sessions_per_worker,
                                                     args.min_sessions)
    workdir = Path(tempfile.mkdtemp(prefix="stackroute-throughput-"))
    os.environ.setdefault(LOG_ENV, str(workdir / "handlers.jsonl"))
    if args.db:
        result = run(args.db, workdir, levels=levels, sessions_per_worker=per_worker,
                     min_sessions=minimum)
    else:
        from stackroute.bench.reliability.pg_cluster import running_cluster

        with running_cluster(is_durable=True) as cluster:
            result = run(cluster.create_database("throughput"), workdir, levels=levels,
                         sessions_per_worker=per_worker, min_sessions=minimum)
    print(json.dumps(result, indent=1))
    return 0 if all(r["statuses"].get("done") == r["sessions"] for r in result["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
