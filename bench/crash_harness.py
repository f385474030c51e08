"""Crash safety: SIGKILL `stackroute serve` at random moments under live sessions, restart it,
and check that nothing accepted was lost and no leaf ran twice.

    python -m stackroute.bench.crash_harness            # full size: 60 kills
    python -m stackroute.bench.crash_harness --smoke    # 5 kills (CI: tests/reliability)
        [--kills N] [--seed S] [--concurrency C] [--out DIR] [--json]
    python -m stackroute.bench.crash_harness --instances 3 --sessions 100 --kills 40
        # three instances over one PostgreSQL (a throwaway cluster, or --db URL); each kill
        # SIGKILLs the next instance in turn and restarts it while the others keep serving

Several instances (`--instances N`, PostgreSQL): the client sends each round of requests to
the next live instance, so sessions are created, approved and finished on different ones; a
killed instance's sessions are taken over by the others once its lease (`--lease-s`) expires.
The checks are the same, over all instances' work.

The server is the real one (`python -m stackroute.server.cli serve`, a temp SQLite file, a
catalog file) with the deterministic engine `stackroute.bench.scripted_engine:create` (that
module says why not the embedded model) and leaf handlers from `stackroute.bench.
crash_handlers`, allowed by `allowed_handler_modules`, that log every execution to a file.
A client thread (`crash_driver`) keeps `concurrency` multi-level sessions going, answers their
confirmation gates (some approved, some rejected, some sessions auto-approved) and uploads a
catalog after every start. The harness kills the server after a random delay, reads the
database as the kill left it (which transition each session had reached, and whether a leaf
call was in flight), restarts the server, and repeats. Then it lets every session finish and
checks, for every session the server ever held:

1. nothing accepted was lost: every 201 session exists and is done, every 201 catalog is
   listed, every 200 approval or rejection is in its session's trace;
2. it resumed from its last recorded transition: what the database held at each kill is a
   prefix of the final trace, whose seqs run 0..n-1 without a gap;
3. the final trace equals that of an uninterrupted in-process run making the same decisions
   (`TraceEvent.comparable()`, less `is_replayed`): a call the service reported as
   interrupted (killed inside its handler, so it may have taken effect) fails the same way in
   the reference run, since not running it again is the point;
4. no leaf ran twice: the handlers' log has at most one line per call, exactly one for every
   call the trace shows as run, none for a rejected call; and the calls begun but never
   finished in the store are exactly the ones reported as interrupted.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
from stackroute.bench.crash_driver import Driver
from stackroute.bench.crash_handlers import LOG_ENV, read_log
from stackroute.bench.crash_plan import (
    CATALOG,
    HANDLER_MODULE,
    catalog_tree,
    reference_run,
    tag_of,
)
from stackroute.bench.serve_process import ServerProcess
from stackroute.runtime.governance import Limits
from stackroute.runtime.trace import TraceEvent
from stackroute.server.service.store import strict_json

ENGINE = "stackroute.bench.scripted_engine:create"
PACED_ENGINE = "stackroute.bench.scripted_engine:create_paced"
FULL_KILLS = 60
SMOKE_KILLS = 5
INTERRUPTED = "interrupted"  # how StoreExecutor's error for a call killed mid-handler begins


@dataclass(frozen=True, kw_only=True)
class HarnessOptions:
    kills: int = FULL_KILLS
    seed: int = 0
    concurrency: int = 6
    min_delay_s: float = 0.1  # after the server is ready, before the kill
    max_delay_s: float = 1.2
    finish_timeout_s: float = 120.0
    out: Path | None = None  # working folder (default: a temp folder)
    instances: int = 1  # `stackroute serve` processes over one database
    db_url: str | None = None  # None: a SQLite file in the working folder
    lease_s: float = 2.0  # session_lease_s of each instance (shared store only)
    max_sessions: int | None = None  # stop creating after this many sessions
    engine: str = ENGINE  # e.g. PACED_ENGINE: slower sessions, so kills land inside them


@dataclass
class CrashReport:
    instances: int = 1
    store: str = "sqlite"
    kills: int = 0
    kills_with_progress: int = 0  # kills after which the database held new transitions
    positions: dict[str, int] = field(default_factory=dict)  # running sessions' state at kills
    restart_s_p50: float = 0.0
    restart_s_max: float = 0.0
    sessions: int = 0
    sessions_accepted: int = 0  # 201 received
    sessions_orphaned: int = 0  # stored, but the 201 was lost in a kill
    sessions_through_kills: int = 0  # running or paused at one kill at least
    transitions: int = 0
    leaf_executions: int = 0
    calls_interrupted: int = 0
    results_replayed: int = 0  # recorded results handed back instead of running again
    gates_accepted: int = 0
    catalogs_accepted: int = 0
    requests: int = 0
    transport_errors: int = 0
    duration_s: float = 0.0
    failures: list[str] = field(default_factory=list)
    workdir: str = ""

    @property
    def is_ok(self) -> bool:
        return not self.failures

    def summary(self) -> str:
        lines = [
            f"{self.instances} instance(s) over {self.store}; "
            f"kills survived: {self.kills} ({self.kills_with_progress} with new transitions "
            f"saved since the restart before), restarts p50 {self.restart_s_p50:.2f} s, max "
            f"{self.restart_s_max:.2f} s",
            f"where running sessions were at the kills: {dict(sorted(self.positions.items()))}",
            f"sessions: {self.sessions} ({self.sessions_accepted} with a 201, "
            f"{self.sessions_orphaned} stored whose 201 was lost), "
            f"{self.sessions_through_kills} lived through a kill",
            f"transitions: {self.transitions}, leaf executions: {self.leaf_executions}, "
            f"interrupted calls: {self.calls_interrupted}, replayed results: "
            f"{self.results_replayed}, gate answers accepted: {self.gates_accepted}, "
            f"catalogs accepted: {self.catalogs_accepted}",
            f"requests: {self.requests} ({self.transport_errors} cut by kills), "
            f"{self.duration_s:.0f} s",
            "OK: nothing lost, nothing run twice, traces equal the uninterrupted runs"
            if self.is_ok else f"FAILED ({len(self.failures)}):\n  " + "\n  ".join(
                self.failures[:30]),
        ]
        return "\n".join(lines)


def run_harness(options: HarnessOptions) -> CrashReport:
    started = time.monotonic()
    workdir = options.out or Path(tempfile.mkdtemp(prefix="stackroute-crash-"))
    workdir.mkdir(parents=True, exist_ok=True)
    db = options.db_url or str(workdir / "stackroute.db")
    log = workdir / "handlers.jsonl"
    servers = _servers(workdir, db, log, options)
    report = CrashReport(workdir=str(workdir), instances=len(servers),
                         store="postgresql" if options.db_url else "sqlite")
    rng = random.Random(options.seed)
    restart_s = [server.start() for server in servers]
    server = servers[0]
    driver = Driver(catalog_id=_catalog_id(server.base_url), seed=options.seed,
                    concurrency=options.concurrency, max_sessions=options.max_sessions)
    driver.point_at_all([s.base_url for s in servers], 0)
    driver.start()
    snapshots: list[dict[str, list[dict[str, Any]]]] = []
    positions: Counter[str] = Counter()
    num_transitions = 0
    try:
        kill = 0
        # With max_sessions, kills go on until every session is created (at most 3x kills).
        while kill < options.kills or (not driver.is_done_creating and options.max_sessions
                                       and kill < 3 * options.kills):
            time.sleep(rng.uniform(options.min_delay_s, options.max_delay_s))
            server = servers[kill % len(servers)]  # in turn: each instance dies in its turn
            for other in servers:
                if not other.is_alive():
                    report.failures.append(f"an instance exited by itself before kill {kill}:"
                                           f"\n{other.log_tail()}")
            live = [s.base_url for s in servers if s is not server]
            if live:  # the others keep serving while this one is down
                driver.point_at_all(live, driver.generation)
            driver.mark_dead(server.base_url)  # before the kill: its errors are expected
            server.kill()
            report.kills += 1
            snapshot, at_kill, total = _inspect(db)
            snapshots.append(snapshot)
            positions.update(at_kill)
            report.kills_with_progress += total > num_transitions
            num_transitions = total
            restart_s.append(server.start())
            kill += 1
            driver.point_at_all([s.base_url for s in servers], kill)
        driver.is_creating = False
        _wait_until_idle(driver, servers, options.finish_timeout_s, report)
    finally:
        driver.stop()
    final = _final_state(servers[-1].base_url)
    for server in servers:
        server.stop()
    _verify(report, driver, final, snapshots, read_log(log), db)
    report.positions = dict(positions)
    report.restart_s_p50 = statistics.median(restart_s)
    report.restart_s_max = max(restart_s)
    report.requests = driver.num_requests
    report.transport_errors = driver.num_transport_errors
    report.failures[:0] = driver.unexpected
    report.duration_s = time.monotonic() - started
    return report


def _servers(workdir: Path, db: str, log: Path,
             options: HarnessOptions) -> list[ServerProcess]:
    catalog = workdir / "crash-ops.json"
    catalog.write_text(json.dumps(CATALOG, indent=1))
    config = workdir / "serve.json"
    config.write_text(json.dumps({
        "engine": options.engine, "allowed_handler_modules": [HANDLER_MODULE],
        "leaf_timeout_s": 10.0, "log_level": "warning",
        "session_lease_s": options.lease_s}))
    return [ServerProcess(["--config", str(config), "--db", db, "--catalog", str(catalog)],
                          log_path=workdir / (f"serve-{i}.log" if options.instances > 1
                                              else "serve.log"),
                          env={LOG_ENV: str(log)})
            for i in range(options.instances)]


def _catalog_id(base_url: str) -> str:
    catalogs = httpx.get(f"{base_url}/v1/catalogs", timeout=10).json()["catalogs"]
    return next(str(c["id"]) for c in catalogs if c["name"] == CATALOG["name"])


def _wait_until_idle(driver: Driver, servers: Sequence[ServerProcess], timeout_s: float,
                     report: CrashReport) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for server in servers:
            if not server.is_alive():
                report.failures.append(f"the server exited by itself:\n{server.log_tail()}")
                return
        if driver.num_active == 0:
            time.sleep(0.3)  # one more look: a create may have been in flight
            if driver.num_active == 0:
                return
        time.sleep(0.05)
    report.failures.append(f"sessions still active {timeout_s:.0f} s after the last kill")


# -- reading the database as a kill left it ------------------------------------------------------
def _read(db: str, sql: str) -> list[tuple[Any, ...]]:
    """Rows of a read-only query, from the SQLite file or the PostgreSQL URL."""
    if db.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(db) as pg:
            return [tuple(r) for r in pg.execute(sql).fetchall()]
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [tuple(r) for r in conn.execute(sql).fetchall()]
    finally:
        conn.close()


def _inspect(db: str) -> tuple[dict[str, list[dict[str, Any]]], Counter[str], int]:
    """Each session's saved trace (comparable events), where each running session was, and
    the number of transitions saved."""
    traces: dict[str, list[dict[str, Any]]] = {}
    for sid, event in _read(db, "SELECT session_id, event FROM transitions "
                                "ORDER BY session_id, seq"):
        traces.setdefault(sid, []).append(_comparable(json.loads(event)))
    executions = {cid: bool(done) for cid, done in _read(
        db, "SELECT call_id, is_finished FROM leaf_executions")}
    positions: Counter[str] = Counter()
    for status, state_json in _read(db, "SELECT status, state FROM sessions WHERE "
                                        "status IN ('running', 'paused')"):
        pending = json.loads(state_json)["pending"]
        if status == "paused":
            positions["paused_at_gate"] += 1
        elif pending is None:
            positions["routing"] += 1  # between transitions or inside a routing call
        elif pending["call_id"] not in executions:
            positions["leaf_pending_not_begun"] += 1
        elif not executions[pending["call_id"]]:
            positions["inside_handler"] += 1
        else:
            positions["handler_done_result_unsaved"] += 1
    total = sum(len(t) for t in traces.values())
    return traces, positions, total


# -- the end state -------------------------------------------------------------------------------
@dataclass
class _Final:
    sessions: dict[str, dict[str, Any]]  # id -> session view (with state)
    traces: dict[str, list[dict[str, Any]]]  # id -> trace events as dicts
    catalogs: set[str]


def _final_state(base_url: str) -> _Final:
    with httpx.Client(base_url=base_url, timeout=30) as client:
        rows = client.get("/v1/sessions", params={"limit": 1000}).json()["sessions"]
        sessions, traces = {}, {}
        for row in rows:
            sid = row["id"]
            sessions[sid] = client.get(f"/v1/sessions/{sid}",
                                       params={"include_state": True}).json()
            text = client.get(f"/v1/sessions/{sid}/trace").text
            traces[sid] = [json.loads(line) for line in text.splitlines() if line]
        catalogs = {c["id"] for c in client.get("/v1/catalogs").json()["catalogs"]}
    return _Final(sessions, traces, catalogs)


def _comparable(event: dict[str, Any]) -> dict[str, Any]:
    data = TraceEvent.from_dict(event).comparable()
    if "detail" in data:
        data["detail"] = {k: v for k, v in data["detail"].items() if k != "is_replayed"}
    return dict(json.loads(strict_json(data)))


def _verify(report: CrashReport, driver: Driver, final: _Final,
            snapshots: list[dict[str, list[dict[str, Any]]]], log: list[dict[str, Any]],
            db: str) -> None:
    fail = report.failures.append
    tree = catalog_tree()
    accepted = driver.accepted
    report.sessions = len(final.sessions)
    report.sessions_accepted = len(accepted.sessions)
    report.catalogs_accepted = len(accepted.catalogs)
    if report.kills and not accepted.sessions:
        # Nothing lost because nothing ran: a vacuous run is a failure, not a pass.
        fail(f"no session was accepted in {report.kills} kills ({driver.num_requests} "
             f"requests, {driver.num_transport_errors} cut by kills): the run tested nothing")
    report.gates_accepted = len(accepted.gates)
    for sid in accepted.sessions:
        if sid not in final.sessions:
            fail(f"session {sid} was accepted (201) and is gone")
    for cid in accepted.catalogs - final.catalogs:
        fail(f"catalog {cid} was accepted (201) and is gone")
    calls_by_key: dict[tuple[str, str], str] = {}  # (leaf, ref) -> call id
    executed: set[str] = set()
    interrupted_calls: set[str] = set()
    for sid, view in final.sessions.items():
        trace = final.traces[sid]
        report.transitions += len(trace)
        report.sessions_orphaned += sid not in accepted.sessions
        report.sessions_through_kills += any(
            sid in s and s[sid][-1]["kind"] != "finish" for s in snapshots)
        job = driver.jobs.get(str(tag_of(view["task"])))
        if job is None:
            fail(f"session {sid} runs a task no job wrote: {view['task']!r}")
            continue
        if view["status"] != "done":
            fail(f"session {sid} ({job.tag}) ended {view['status']}: {view.get('error')}")
        if [e["seq"] for e in trace] != list(range(len(trace))):
            fail(f"session {sid}: trace seqs are not 0..{len(trace) - 1}")
        got = [_comparable(e) for e in trace]
        for i, snapshot in enumerate(snapshots):
            saved = snapshot.get(sid, [])
            if got[:len(saved)] != saved:
                fail(f"session {sid}: what was saved at kill {i + 1} is not a prefix of its "
                     "final trace")
        interrupted: dict[str, str] = {}
        for e in trace:
            detail = e.get("detail", {})
            if e["kind"] == "leaf_pending":
                calls_by_key[(detail["leaf"].rsplit("/", 1)[-1],
                              e["arguments"]["ref"])] = detail["call_id"]
            if e["kind"] == "leaf_result":
                if detail.get("is_replayed") and e.get("error") is None:
                    report.results_replayed += 1
                if (e.get("error") or "").startswith(INTERRUPTED):
                    interrupted[detail["call_id"]] = e["error"]
                elif e.get("error") is None:
                    executed.add(detail["call_id"])
        interrupted_calls.update(interrupted)
        reference = reference_run(tree, job, run_id=sid,
                                  limits=Limits.from_dict(view["state"]["limits"]),
                                  interrupted=interrupted)
        want = [_comparable(e.to_dict()) for e in reference.trace]
        if got != want:
            at = next((i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b),
                      min(len(got), len(want)))
            fail(f"session {sid} ({job.tag}): trace differs from the uninterrupted run at "
                 f"event {at}: {got[at:at + 1]} != {want[at:at + 1]}")
    for sid, call_id, action in accepted.gates:
        trace = final.traces.get(sid, [])
        if not any(e["kind"] == f"gate_{action}" and e.get("detail", {}).get("call_id")
                   == call_id for e in trace):
            fail(f"session {sid}: the {action} of {call_id} was accepted (200) and is not in "
                 "the trace")
    report.calls_interrupted = len(interrupted_calls)
    report.leaf_executions = len(log)
    runs = Counter(calls_by_key.get((line["leaf"], line["arguments"]["ref"]), "?")
                   for line in log)
    for call_id, count in runs.items():
        if call_id == "?":
            fail(f"{count} handler execution(s) match no call in any trace")
        elif count > 1:
            fail(f"call {call_id} ran {count} times")
    for call_id in executed - set(runs):
        fail(f"call {call_id} has a result but its handler never ran")
    for call_id in set(runs) - executed - interrupted_calls - {"?"}:
        fail(f"call {call_id} ran but its trace shows no result")
    unfinished = {r[0] for r in _read(db, "SELECT call_id FROM leaf_executions WHERE NOT "
                                          "is_finished")}
    if unfinished != interrupted_calls:
        fail(f"calls begun and never finished {sorted(unfinished)} are not the calls reported "
             f"interrupted {sorted(interrupted_calls)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help=f"{SMOKE_KILLS} kills (CI size)")
    parser.add_argument("--kills", type=int, default=None, help=f"default {FULL_KILLS}")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--concurrency", type=int, default=6)
    parser.add_argument("--instances", type=int, default=1,
                        help="serve processes over one database (more than 1: PostgreSQL)")
    parser.add_argument("--db", default=None, help="a postgresql:// URL (default with "
                        "--instances > 1: a throwaway local cluster)")
    parser.add_argument("--lease-s", type=float, default=2.0)
    parser.add_argument("--sessions", type=int, default=None, help="stop creating after N")
    parser.add_argument("--paced", action="store_true", help="routing calls of "
                        "scripted_engine.PACED_DELAY_S, so sessions outlast several kills")
    parser.add_argument("--min-delay-s", type=float, default=0.1)
    parser.add_argument("--max-delay-s", type=float, default=1.2)
    parser.add_argument("--out", type=Path, default=None, help="working folder (kept)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    kills = args.kills if args.kills is not None else SMOKE_KILLS if args.smoke else FULL_KILLS
    options = HarnessOptions(kills=kills, seed=args.seed, concurrency=args.concurrency,
                             out=args.out, instances=args.instances, db_url=args.db,
                             lease_s=args.lease_s, max_sessions=args.sessions,
                             min_delay_s=args.min_delay_s, max_delay_s=args.max_delay_s,
                             engine=PACED_ENGINE if args.paced else ENGINE)
    if args.instances > 1 and args.db is None:
        from stackroute.bench.pg_cluster import running_cluster

        with running_cluster() as cluster:
            report = run_harness(replace(options, db_url=cluster.create_database("crash")))
    else:
        report = run_harness(options)
    if args.json:
        print(json.dumps({**asdict(report), "is_ok": report.is_ok}, indent=1))
    else:
        print(report.summary())
    return 0 if report.is_ok else 1


if __name__ == "__main__":
    sys.exit(main())
