"""Crash safety: SIGKILL `stackroute serve` at random moments under live sessions, restart it,
and check that nothing accepted was lost and no leaf ran twice.

    stackroute bench crash            # full size: 60 kills
    stackroute bench crash --smoke    # 5 kills (CI)
        [--kills N] [--seed S] [--concurrency C] [--out DIR] [--json]
    stackroute bench crash --instances 3 --sessions 100 --kills 40
        # three instances over one PostgreSQL (a throwaway cluster, or --db URL); each kill
        # SIGKILLs the next instance in turn and restarts it while the others keep serving

Several instances (`--instances N`, PostgreSQL): the client sends each round of requests to
the next live instance, so sessions are created, approved and finished on different ones; a
killed instance's sessions are taken over by the others once its lease (`--lease-s`) expires.
The checks are the same, over all instances' work.

The server is the real one (`python -m stackroute.server.cli serve`, a temp SQLite file, a
catalog file) with the deterministic engine `stackroute.bench.fixtures.scripted_engine:create` (that
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
   call the trace shows as run, none for a rejected call; the calls begun but never finished
   in the store are all reported as interrupted, and one reported interrupted that is
   finished in the store (its holder was fenced off while the handler ran) ran once.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import httpx
from stackroute.bench.reliability.crash_checks import CrashReport, final_state, inspect_db, verify
from stackroute.bench.reliability.crash_driver import Driver
from stackroute.bench.reliability.crash_handlers import LOG_ENV, read_log
from stackroute.bench.reliability.crash_plan import CATALOG, HANDLER_MODULE
from stackroute.bench.reliability.serve_process import ServerProcess

__all__ = ["PACED_ENGINE", "SMOKE_KILLS", "CrashReport", "HarnessOptions", "run_harness"]

ENGINE = "stackroute.bench.fixtures.scripted_engine:create"
PACED_ENGINE = "stackroute.bench.fixtures.scripted_engine:create_paced"
FULL_KILLS = 60
SMOKE_KILLS = 5


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
            snapshot, at_kill, total = inspect_db(db)
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
    final = final_state(servers[-1].base_url)
    for server in servers:
        server.stop()
    verify(report, driver, final, snapshots, read_log(log), db)
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
        from stackroute.bench.reliability.pg_cluster import running_cluster

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
