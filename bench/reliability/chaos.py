"""The chaos run: several `stackroute serve` instances over one PostgreSQL, under more than
kills, checking that no session is lost and no side effect happens twice.

    stackroute bench chaos [--smoke] [--instances 3] [--sessions N] [--kills K]
                           [--pg-restarts R] [--slow-takeovers T] [--lease-s S] [--seed S]
                           [--out DIR] [--json]

A client (`crash_driver`) keeps sessions going through every live instance, answering their
gates, while the run plays a seeded, shuffled list of events, one at a time:

- **kill**: SIGKILL the next instance, read the database as the kill left it, restart it;
- **pg-restart**: crash PostgreSQL (`pg_ctl -m immediate`), keep it down for longer than a
  lease (clients cannot connect; every instance's leases lapse), start it again; meanwhile a
  503 or no answer is the contract (counted), and after it every instance serves again;
- **slow-takeover**: upload a `slow-k` catalog to instance V and start sessions on it there;
  a delete of the catalog while they run is refused (409); SIGKILL V. The instance that
  claims V's sessions compiles the catalog inside its takeover for twice the lease
  (`chaos_engine`): its keeper must renew its claims meanwhile. Then the forced
  claim/claim/load interleaving: that claimant is frozen (SIGSTOP, a stalled VM) between
  its claim and its load until its claims lapse and the third instance claims them, and
  resumed (SIGCONT): it must load under its own, now stale, token and be refused, never run
  them beside the new holder (a session whose token rose twice after its creation counts
  it). Once they are done the catalog is deleted through W, and a session on it through X
  (which has it in memory) must be refused (404). Then V restarts.

The handlers (`chaos_handlers`) record every execution in their own PostgreSQL table, so the
side effects are counted: `duplicates` is the number of executions beyond the first of each
call. The end state is checked as the crash run checks it (`crash_checks.verify`: every
accepted session done and its trace equal to an uninterrupted run, every accepted approval
applied exactly once, no leaf run twice), and `lost` counts accepted sessions not done.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import httpx
from stackroute.bench.reliability.chaos_engine import PREPARE_ENV, SLOW_PREFIX
from stackroute.bench.reliability.chaos_handlers import (
    DB_ENV,
    create_table,
    duplicates,
    side_effects,
)
from stackroute.bench.reliability.chaos_report import SMOKE, ChaosOptions, ChaosReport
from stackroute.bench.reliability.crash_checks import (
    CrashReport,
    final_state,
    inspect_db,
    read_db,
    verify,
)
from stackroute.bench.reliability.crash_driver import Driver
from stackroute.bench.reliability.crash_plan import CATALOG, HANDLER_MODULE, catalog_tree, make_job
from stackroute.bench.reliability.pg_cluster import PgCluster
from stackroute.bench.reliability.serve_process import ServerProcess
from stackroute.runtime.catalog import build_tree

ENGINE = "stackroute.bench.reliability.chaos_engine:create"
CHAOS_HANDLERS = "stackroute.bench.reliability.chaos_handlers"
SETTLE_TIMEOUT_S = 120.0


def chaos_catalog(name: str) -> dict[str, Any]:
    """The crash harness's catalog under another name, its handlers recording to the table."""
    text = json.dumps(CATALOG).replace(HANDLER_MODULE, CHAOS_HANDLERS)
    return {**json.loads(text), "name": name}


class _Run:
    def __init__(self, options: ChaosOptions, cluster: PgCluster, db: str,
                 workdir: Path) -> None:
        self.options, self.cluster, self.db, self.workdir = options, cluster, db, workdir
        self.rng = random.Random(options.seed)
        self.report = ChaosReport()
        self.report.crash = CrashReport(instances=options.instances, store="postgresql",
                                        workdir=str(workdir))
        self.snapshots: list[dict[str, list[dict[str, Any]]]] = []
        self.slow_ids: list[str] = []
        catalog = workdir / "chaos-ops.json"
        catalog.write_text(json.dumps(chaos_catalog(CATALOG["name"])))
        config = workdir / "serve.json"
        config.write_text(json.dumps({
            "engine": ENGINE, "allowed_handler_modules": [CHAOS_HANDLERS],
            "leaf_timeout_s": 90.0, "log_level": "info", "session_lease_s": options.lease_s}))
        self.servers = [ServerProcess(
            ["--config", str(config), "--db", db, "--catalog", str(catalog)],
            log_path=workdir / f"serve-{i}.log",
            env={DB_ENV: db, PREPARE_ENV: str(options.slow_prepare_s)})
            for i in range(options.instances)]
        self._driver: Driver | None = None
        self.client = httpx.Client(timeout=60)

    @property
    def driver(self) -> Driver:
        if self._driver is None:
            raise RuntimeError("the client is not started yet")
        return self._driver

    def fail(self, message: str) -> None:
        self.report.failures.append(message)

    # -- events --------------------------------------------------------------------------------
    def kill(self, server: ServerProcess) -> None:
        self.driver.point_at_all([s.base_url for s in self.servers if s is not server],
                                 self.driver.generation)
        self.driver.mark_dead(server.base_url)
        server.kill()
        self.report.crash.kills += 1
        self.snapshots.append(inspect_db(self.db)[0])

    def restart(self, server: ServerProcess) -> None:
        server.start()
        self.driver.point_at_all([s.base_url for s in self.servers],
                                 self.driver.generation + 1)

    def pg_restart(self) -> None:
        self.driver.is_store_down = True
        try:
            self.cluster.restart(down_s=self.options.pg_down_s)
            deadline = time.monotonic() + SETTLE_TIMEOUT_S
            for server in self.servers:  # every instance serves from the store again
                while self._status(server, "GET", "/v1/sessions?limit=1") != 200:
                    if time.monotonic() > deadline:
                        self.fail(f"{server.base_url} did not serve again after the "
                                  "PostgreSQL restart")
                        break
                    time.sleep(0.2)
            time.sleep(1.0)  # requests that waited on the pool during the outage finish
        finally:
            self.driver.is_store_down = False
        self.report.pg_restarts += 1

    def slow_takeover(self, k: int) -> None:
        n = len(self.servers)
        v, w = self.servers[k % n], self.servers[(k + 1) % n]
        x = self.servers[(k + 2) % n] if n > 2 else w
        r = self.client.post(f"{v.base_url}/v1/catalogs", content=json.dumps(
            chaos_catalog(f"{SLOW_PREFIX}{k}")), headers={"content-type": "application/json"})
        if r.status_code != 201:
            return self.fail(f"slow catalog upload -> {r.status_code}: {r.text[:200]}")
        catalog_id = r.json()["id"]
        ids = []
        for i in range(self.options.slow_sessions):
            job = replace(make_job(self.rng, 0, catalog_tree()), tag=f"S{k}x{i}",
                          rejects=frozenset(), is_auto_approve=True)
            self.driver.jobs[job.tag] = job
            r = self.client.post(f"{v.base_url}/v1/sessions", json={
                "catalog": catalog_id, "task": job.task, "auto_approve": True})
            if r.status_code != 201:
                return self.fail(f"slow session create -> {r.status_code}: {r.text[:200]}")
            ids.append(r.json()["id"])
            self.driver.accepted.sessions[ids[-1]] = job.tag
        self.slow_ids += ids
        status = self._status(v, "DELETE", f"/v1/catalogs/{catalog_id}")
        if status == 409:
            self.report.catalog_deletes_refused_in_use += 1
        elif self._num_active(catalog_id):
            self.fail(f"a delete of catalog {catalog_id} in use answered {status}, not 409")
        self.kill(v)  # the others take its sessions over, compiling slow-k for 2 leases
        if n > 2:
            self._freeze_claimant(ids, [w, x])
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while self._num_active(catalog_id):
            if time.monotonic() > deadline:
                self.fail(f"slow-takeover sessions on {catalog_id} did not finish")
                break
            time.sleep(0.2)
        status = self._status(w, "DELETE", f"/v1/catalogs/{catalog_id}")
        if status == 204:
            self.report.catalogs_deleted += 1
            status = self._status(x, "POST", "/v1/sessions", json={
                "catalog": catalog_id, "task": "job=Z0 amount=1 plan: cards card_status"})
            if status == 404:
                self.report.creates_refused_on_deleted_catalog += 1
            else:
                self.fail(f"a session on deleted catalog {catalog_id} answered {status}")
        else:
            self.fail(f"deleting catalog {catalog_id} after its sessions ended -> {status}")
        self.restart(v)
        self.report.slow_takeovers += 1

    def _freeze_claimant(self, ids: list[str], others: list[ServerProcess]) -> None:
        """SIGSTOP the instance that claimed `ids` (it is compiling their catalog) until the
        other one has claimed them too, then SIGCONT it: it loads under a stale token."""
        owners = {f":{s.pid}:": s for s in others}
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        claimant = None
        while claimant is None and time.monotonic() < deadline:
            rows = self._leases(ids)
            claimant = next((s for key, s in owners.items() for owner, _, _ in rows
                             if owner and key in owner), None)
            if all(status != "running" for _, _, status in rows):
                return  # finished before anyone froze: nothing to interleave
            time.sleep(0.05)
        if claimant is None or claimant.pid is None:
            return self.fail(f"no instance claimed the sessions {ids} of the killed one")
        tokens = {sid: token for sid, (_, token, _) in zip(ids, self._leases(ids), strict=True)}
        self.driver.mark_dead(claimant.base_url)  # it answers nothing while frozen
        os.kill(claimant.pid, signal.SIGSTOP)
        try:
            self.report.claimants_frozen += 1
            deadline = time.monotonic() + 4 * self.options.lease_s + 10
            while time.monotonic() < deadline and any(
                    token <= tokens[sid] and status == "running"
                    for sid, (_, token, status) in zip(ids, self._leases(ids), strict=True)):
                time.sleep(0.05)
        finally:
            os.kill(claimant.pid, signal.SIGCONT)
            self.driver.mark_alive(claimant.base_url)

    # -- helpers -------------------------------------------------------------------------------
    def _leases(self, ids: list[str]) -> list[tuple[str | None, int, str]]:
        """(owner, lease token, status) of each session, in the order of `ids`."""
        rows = {sid: (owner, int(token), status) for sid, owner, token, status in read_db(
            self.db, "SELECT id, owner, lease_token, status FROM sessions WHERE id IN (" +
            ", ".join(f"'{sid}'" for sid in ids) + ")")}
        return [rows[sid] for sid in ids]

    def _status(self, server: ServerProcess, method: str, path: str, **kwargs: Any) -> int:
        try:
            return self.client.request(method, f"{server.base_url}{path}", **kwargs).status_code
        except httpx.TransportError:
            return 0

    def _num_active(self, catalog_id: str) -> int:
        return int(read_db(self.db, "SELECT COUNT(*) FROM sessions WHERE catalog_id = "
                                    f"'{catalog_id}' AND status IN ('running', 'paused')")[0][0])

    def run(self) -> ChaosReport:
        o = self.options
        started = time.monotonic()
        for server in self.servers:
            server.start()
        catalogs = self.client.get(f"{self.servers[0].base_url}/v1/catalogs").json()
        catalog_id = next(c["id"] for c in catalogs["catalogs"] if c["name"] == CATALOG["name"])
        self._driver = driver = Driver(catalog_id=catalog_id, seed=o.seed,
                                       concurrency=o.concurrency, max_sessions=o.sessions)
        driver.point_at_all([s.base_url for s in self.servers], 0)
        driver.start()
        events = ["kill"] * o.kills + ["pg"] * o.pg_restarts + ["slow"] * o.slow_takeovers
        self.rng.shuffle(events)
        num_kills = num_slow = 0
        try:
            for event in events:
                time.sleep(self.rng.uniform(o.min_delay_s, o.max_delay_s))
                for server in self.servers:
                    if not server.is_alive():
                        self.fail(f"an instance exited by itself:\n{server.log_tail()}")
                        server.start()
                if event == "kill":
                    server = self.servers[num_kills % len(self.servers)]
                    num_kills += 1
                    self.kill(server)
                    self.restart(server)
                elif event == "pg":
                    self.pg_restart()
                else:
                    self.slow_takeover(num_slow)
                    num_slow += 1
            deadline = time.monotonic() + SETTLE_TIMEOUT_S
            while not driver.is_done_creating and time.monotonic() < deadline:
                time.sleep(0.2)
            driver.is_creating = False
            self._wait_idle(driver)
        finally:
            driver.stop()
        final = final_state(self.servers[-1].base_url)
        for server in self.servers:
            server.stop()
        self._count(driver, final)
        self.report.crash.duration_s = time.monotonic() - started
        return self.report

    def _wait_idle(self, driver: Driver) -> None:
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while time.monotonic() < deadline:
            if driver.num_active == 0:
                time.sleep(0.5)
                if driver.num_active == 0:
                    return
            time.sleep(0.1)
        self.fail(f"sessions still active {SETTLE_TIMEOUT_S:.0f} s after the last event")

    def _count(self, driver: Driver, final: Any) -> None:
        report, crash = self.report, self.report.crash
        log = side_effects(self.db)
        verify(crash, driver, final, self.snapshots, log, self.db,
               tree=build_tree(chaos_catalog(CATALOG["name"])))
        crash.failures[:0] = driver.unexpected
        crash.requests = driver.num_requests
        crash.transport_errors = driver.num_transport_errors
        report.requests_refused_while_pg_down = driver.num_refused_store_down
        report.side_effects = len(log)
        report.duplicates = duplicates(self.db)
        report.lost = sum(1 for sid in driver.accepted.sessions
                          if final.sessions.get(sid, {}).get("status") != "done")
        if self.slow_ids:
            tokens = read_db(self.db, "SELECT lease_token FROM sessions WHERE id IN (" +
                             ", ".join(f"'{sid}'" for sid in self.slow_ids) + ")")
            report.sessions_claimed_twice_in_takeover = sum(1 for (t,) in tokens if t >= 3)
        report.stale_writes_refused = sum(
            s.log_path.read_text(errors="replace").count("is stale") for s in self.servers)
        if report.duplicates or report.lost:
            self.fail(f"{report.duplicates} duplicate side effects, {report.lost} sessions lost")


def run_chaos(options: ChaosOptions) -> ChaosReport:
    """The whole run on a throwaway PostgreSQL cluster of its own (it is restarted mid-run)."""
    workdir = options.out or Path(tempfile.mkdtemp(prefix="stackroute-chaos-"))
    workdir.mkdir(parents=True, exist_ok=True)
    # Durable (fsync, synchronous_commit on), as a deployment is: the run crashes PostgreSQL,
    # and the test clusters' synchronous_commit=off loses commits already acknowledged (a
    # full run without it lost a leaf call's begun record, and the session ended in error).
    cluster = PgCluster.start(is_durable=True)
    try:
        db = cluster.create_database("chaos")
        create_table(db)
        run = _Run(options, cluster, db, workdir)
        try:
            return run.run()
        finally:
            run.client.close()
            for server in run.servers:
                server.stop()
    finally:
        cluster.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stackroute bench chaos",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="CI size: 1 kill, 1 PostgreSQL "
                        "restart, 1 slow takeover, 5 sessions")
    defaults = ChaosOptions()
    for name in ("instances", "sessions", "kills", "pg_restarts", "slow_takeovers",
                 "slow_sessions", "concurrency", "seed"):
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=None,
                            help=f"default {getattr(defaults, name)}")
    parser.add_argument("--lease-s", type=float, default=None,
                        help=f"default {defaults.lease_s}")
    parser.add_argument("--out", type=Path, default=None, help="working folder (kept)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    base = SMOKE if args.smoke else defaults
    given = {k: v for k, v in vars(args).items()
             if v is not None and k not in ("smoke", "json")}
    options = ChaosOptions(**{**asdict(base), **given})
    if options.instances < 2:
        parser.error("--instances must be at least 2")
    report = run_chaos(options)
    if args.json:
        print(json.dumps({**asdict(report), "is_ok": report.is_ok}, indent=1, default=str))
    else:
        print(report.summary())
    return 0 if report.is_ok else 1


if __name__ == "__main__":
    sys.exit(main())
