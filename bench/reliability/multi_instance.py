"""A session relayed across three `stackroute serve` instances over one PostgreSQL, with its
events watched from a third: the cross-instance contract in one scripted run.

    stackroute bench multi-instance [--sessions N] [--db URL] \
        [--out DIR] [--json]

Each session (a plan with two confirmation gates, `crash_plan` catalog, scripted engine):
1. is created on instance A, which routes it to the first gate (and so releases it);
2. is approved through instance B, which claims it and routes it to the second gate;
3. then A and B are SIGKILLed (after the last session's first approval), and the second gate
   is approved through C, the only instance left, which finishes it.
All along, C streams the session's events (`GET /v1/sessions/{id}/events`, SSE), though A
and B make them: `event_latency_ms` is the time from an event's `time_unix` (set by the
instance that made it) to its arrival at the client through C, over a `LISTEN/NOTIFY`
wake-up. Checked: every session is done, its trace equals the uninterrupted reference run,
each leaf ran exactly once (the handlers' log), and the stream carried every event in order.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
from stackroute.bench.reliability.crash_handlers import LOG_ENV, read_log
from stackroute.bench.reliability.crash_plan import (
    CATALOG,
    HANDLER_MODULE,
    Job,
    catalog_tree,
    reference_run,
)
from stackroute.bench.reliability.serve_process import ServerProcess
from stackroute.runtime.governance import Limits
from stackroute.runtime.trace import TraceEvent

ENGINE = "stackroute.bench.fixtures.scripted_engine:create"
RECONNECT_S = 0.5
PLAN = ("payments", "domestic", "check_limit", "send_transfer", "cards", "freeze_card")


@dataclass
class RelayReport:
    sessions: int = 0
    events_streamed: int = 0
    event_latency_ms_p50: float = 0.0
    event_latency_ms_p99: float = 0.0
    event_latency_ms_max: float = 0.0
    leaf_executions: int = 0
    duplicates: int = 0
    failures: list[str] = field(default_factory=list)

    @property
    def is_ok(self) -> bool:
        return not self.failures and self.sessions > 0


def _servers(workdir: Path, db_url: str, log: Path, lease_s: float) -> list[ServerProcess]:
    catalog = workdir / "crash-ops.json"
    catalog.write_text(json.dumps(CATALOG))
    config = workdir / "serve.json"
    config.write_text(json.dumps({"engine": ENGINE, "allowed_handler_modules": [HANDLER_MODULE],
                                  "log_level": "warning", "session_lease_s": lease_s}))
    return [ServerProcess(["--config", str(config), "--db", db_url, "--catalog", str(catalog)],
                          log_path=workdir / f"serve-{name}.log", env={LOG_ENV: str(log)})
            for name in "ABC"]


class _Stream(threading.Thread):
    """SSE from one instance, reconnecting after each `end` (a pause) until `stop`."""

    def __init__(self, base_url: str, session_id: str) -> None:
        super().__init__(daemon=True, name=f"sse-{session_id[:6]}")
        self.url = f"{base_url}/v1/sessions/{session_id}/events"
        # (event, arrival unix time, whether it was made while this stream was connected)
        self.events: list[tuple[dict[str, Any], float, bool]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        last = -1
        with httpx.Client(timeout=60) as client:
            while not self.stop.is_set():
                with client.stream("GET", self.url, params={"after": last}) as response:
                    connected_unix = time.time()
                    kind = ""
                    for line in response.iter_lines():
                        if line.startswith("event:"):
                            kind = line[6:].strip()
                        elif line.startswith("data:") and kind == "transition":
                            event = json.loads(line[5:])
                            self.events.append((event, time.time(),
                                                event["time_unix"] > connected_unix))
                            last = event["seq"]
                        elif line.startswith("data:") and kind == "end":
                            break
                # Paused (an `end`): look again shortly. Events made meanwhile arrive on
                # reconnecting and are not counted as live, so the pause costs no latency.
                self.stop.wait(RECONNECT_S)


def _wait(client: httpx.Client, url: str, session_id: str, status: str,
          timeout_s: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        view = client.get(f"{url}/v1/sessions/{session_id}").json()
        if view["status"] == status:
            return dict(view)
        if time.monotonic() > deadline:
            raise TimeoutError(f"session {session_id} is {view['status']}, not {status}")
        time.sleep(0.02)


def relay(db_url: str, workdir: Path, *, num_sessions: int = 2,
          lease_s: float = 2.0) -> RelayReport:
    log = workdir / "handlers.jsonl"
    servers = _servers(workdir, db_url, log, lease_s)
    report = RelayReport()
    try:
        for server in servers:
            server.start()
        a, b, c = (s.base_url for s in servers)
        with httpx.Client(timeout=30) as client:
            catalog_id = next(x["id"] for x in client.get(f"{c}/v1/catalogs").json()[
                "catalogs"] if x["name"] == CATALOG["name"])
            jobs = [Job(tag=f"R{i}", amount=10 + i, plan=PLAN, rejects=frozenset(),
                        is_auto_approve=False) for i in range(num_sessions)]
            ids, streams = [], []
            for job in jobs:
                r = client.post(f"{a}/v1/sessions", json={"catalog": catalog_id,
                                                          "task": job.task})
                r.raise_for_status()
                ids.append(r.json()["id"])
                stream = _Stream(c, ids[-1])
                stream.start()
                streams.append(stream)
            for sid in ids:  # first gate: made by A, approved through B
                view = _wait(client, b, sid, "paused")
                client.post(f"{b}/v1/sessions/{sid}/approve",
                            json={"digest": view["pending"]["digest"]}).raise_for_status()
            for sid in ids:
                _wait(client, c, sid, "paused")
            servers[0].kill()
            servers[1].kill()
            for sid in ids:  # second gate: approved through C, the only one left
                view = _wait(client, c, sid, "paused")
                client.post(f"{c}/v1/sessions/{sid}/approve",
                            json={"digest": view["pending"]["digest"]}).raise_for_status()
            for sid in ids:
                _wait(client, c, sid, "done")
            traces = {sid: [json.loads(x) for x in client.get(
                f"{c}/v1/sessions/{sid}/trace").text.splitlines() if x] for sid in ids}
            views = {sid: client.get(f"{c}/v1/sessions/{sid}",
                                     params={"include_state": True}).json() for sid in ids}
        time.sleep(0.3)
        for stream in streams:
            stream.stop.set()
        _check(report, jobs, ids, traces, views, streams, read_log(log))
    finally:
        for server in servers:
            server.stop()
    return report


def _check(report: RelayReport, jobs: list[Job], ids: list[str],
           traces: dict[str, list[dict[str, Any]]], views: dict[str, dict[str, Any]],
           streams: list[_Stream], log: list[dict[str, Any]]) -> None:
    tree = catalog_tree()
    latencies = []
    for job, sid, stream in zip(jobs, ids, streams, strict=True):
        report.sessions += 1
        trace = traces[sid]
        want = reference_run(tree, job, run_id=sid,
                             limits=Limits.from_dict(views[sid]["state"]["limits"]),
                             interrupted={}).trace
        if [TraceEvent.from_dict(e).comparable() for e in trace] != \
                [e.comparable() for e in want]:
            report.failures.append(f"session {sid}: trace differs from the reference run")
        seen = [e["seq"] for e, _, _ in stream.events]
        if seen != list(range(len(trace))):
            report.failures.append(f"session {sid}: C streamed seqs {seen[:8]}…, expected "
                                   f"0..{len(trace) - 1}")
        # Events made before the stream (re)connected arrive at once: count only live ones.
        latencies += [(at - e["time_unix"]) * 1000 for e, at, is_live in stream.events
                      if is_live]
        report.events_streamed += len(stream.events)
        ran = [line for line in log if line["arguments"]["ref"] == job.tag]
        calls = [e for e in trace if e["kind"] == "leaf_result"]
        report.leaf_executions += len(ran)
        if len(ran) != len(calls):
            report.duplicates += max(0, len(ran) - len(calls))
            report.failures.append(f"session {sid}: {len(ran)} handler runs for "
                                   f"{len(calls)} leaf results")
    if latencies:
        latencies.sort()
        report.event_latency_ms_p50 = statistics.median(latencies)
        report.event_latency_ms_p99 = latencies[min(len(latencies) - 1,
                                                    int(0.99 * len(latencies)))]
        report.event_latency_ms_max = latencies[-1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stackroute bench multi-instance",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--smoke", action="store_true", help="2 sessions")
    parser.add_argument("--db", default=None, help="postgresql:// URL (default: a throwaway "
                                                   "local cluster)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.smoke:
        args.sessions = 2
    workdir = args.out or Path(tempfile.mkdtemp(prefix="stackroute-relay-"))
    workdir.mkdir(parents=True, exist_ok=True)
    if args.db:
        report = relay(args.db, workdir, num_sessions=args.sessions)
    else:
        from stackroute.bench.reliability.pg_cluster import running_cluster

        with running_cluster() as cluster:
            report = relay(cluster.create_database("relay"), workdir,
                           num_sessions=args.sessions)
    if args.json:
        print(json.dumps({**asdict(report), "is_ok": report.is_ok}, indent=1))
    else:
        print(f"sessions {report.sessions} (created on A, approved through B, finished on C), "
              f"events streamed through C {report.events_streamed}, cross-instance event "
              f"latency p50 {report.event_latency_ms_p50:.1f} ms, p99 "
              f"{report.event_latency_ms_p99:.1f} ms, max {report.event_latency_ms_max:.1f} "
              f"ms; leaf executions {report.leaf_executions}, duplicates {report.duplicates}")
        print("OK" if report.is_ok else "FAILED:\n  " + "\n  ".join(report.failures))
    return 0 if report.is_ok else 1


if __name__ == "__main__":
    sys.exit(main())
