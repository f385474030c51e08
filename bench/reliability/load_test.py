"""Load: N concurrent clients of routing calls and sessions against one server on the CPU engine,
for a fixed time, on loopback only; it stops by itself.

    stackroute bench load   # full: 60 s, 8 routing + 4 session clients
    stackroute bench load --smoke  # 10 s, 3 + 2 clients (CI: in-process)
        [--duration S] [--route-clients N] [--session-clients N] [--max-queue Q]
        [--max-concurrency C] [--cache-mib M] [--malloc-arena-max N] [--json]

The server is `stackroute serve` with the embedded model
(`stackroute.bench.reliability.load_engine:create`:
the real TransformersEngine, its prefix cache capped at --cache-mib so the cap is reached), the
repository's example bank catalog, and a small engine queue so that overload is answered with
429 + Retry-After. Routing clients call POST /v1/route in a loop (a 429 waits its Retry-After,
at most 2 s); session clients start auto-approved sessions and follow each to its end. A
sampler reads /metrics (queue depth, prefix-cache bytes and evictions) and the server's RSS.
(RSS keeps creeping up under many threads with glibc's default of one malloc arena per
thread; with --malloc-arena-max 2 it levels off: 1131 -> 1258 -> 1269 MiB at 0, 120 and 240 s,
against 1157 -> 1359 -> 1437 MiB without.)

It checks: every request got an answer (2xx, or a 429 carrying Retry-After; no 5xx, no
timeout); every session the server accepted (201) is still there and finished; the prefix
cache never held more than its cap. It reports throughput, latency percentiles (ms, routing
calls answered 200), queue depth and memory. The warm-up call is outside the timed region.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = REPO_ROOT / "examples"
REQUEST_TIMEOUT_S = 120.0  # one CPU routing call under load; slower counts as no answer
MAX_BACKOFF_S = 2.0
FINAL = frozenset({"done", "limit", "error", "cancelled"})
_METRIC = re.compile(r"^(stackroute_[a-z_]+)(?:\{[^}]*\})?\s+([0-9.eE+-]+)$", re.M)


@dataclass(frozen=True, kw_only=True)
class LoadOptions:
    duration_s: float = 60.0
    num_route_clients: int = 8
    num_session_clients: int = 4
    max_session_wait_s: float = 180.0  # after the end, for sessions still running
    sample_s: float = 0.5
    seed: int = 0


@dataclass
class LoadReport:
    duration_s: float = 0.0
    requests: int = 0
    statuses: dict[int, int] = field(default_factory=dict)
    route_ok: int = 0
    route_per_s: float = 0.0
    route_p50_ms: float = 0.0
    route_p95_ms: float = 0.0
    route_p99_ms: float = 0.0
    rejected_429: int = 0
    sessions_accepted: int = 0
    sessions_finished: dict[str, int] = field(default_factory=dict)
    sessions_lost: int = 0
    session_p50_s: float = 0.0
    queue_depth_max: float = 0.0
    queue_depth_mean: float = 0.0
    rss_mb_first: float = 0.0
    rss_mb_mid: float = 0.0  # half-way: first to mid is warm-up, mid to last is steady state
    rss_mb_max: float = 0.0
    rss_mb_last: float = 0.0
    cache_mb_max: float = 0.0
    cache_cap_mb: float = 0.0
    cache_evictions: float = 0.0
    failures: list[str] = field(default_factory=list)

    @property
    def is_ok(self) -> bool:
        return not self.failures

    def summary(self) -> str:
        lines = [
            f"{self.duration_s:.0f} s, {self.requests} requests "
            f"{dict(sorted(self.statuses.items()))}",
            f"routing calls answered: {self.route_ok} ({self.route_per_s:.2f}/s), latency p50 "
            f"{self.route_p50_ms:.0f} ms, p95 {self.route_p95_ms:.0f} ms, p99 "
            f"{self.route_p99_ms:.0f} ms; 429 with Retry-After: {self.rejected_429}",
            f"sessions: {self.sessions_accepted} accepted, finished {self.sessions_finished}, "
            f"lost {self.sessions_lost}, p50 {self.session_p50_s:.1f} s to finish",
            f"queue depth max {self.queue_depth_max:.0f}, mean {self.queue_depth_mean:.2f}",
            f"RSS first {self.rss_mb_first:.0f} MiB, mid {self.rss_mb_mid:.0f} MiB, max "
            f"{self.rss_mb_max:.0f} MiB, last "
            f"{self.rss_mb_last:.0f} MiB; prefix cache max {self.cache_mb_max:.1f} MiB of a "
            f"{self.cache_cap_mb:.0f} MiB cap, {self.cache_evictions:.0f} evictions",
            "OK: every request answered or refused cleanly, no session lost, cache under its cap"
            if self.is_ok else "FAILED:\n  " + "\n  ".join(self.failures[:30]),
        ]
        return "\n".join(lines)


class _Tally:
    """What the clients saw; appended to from many threads under one lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.statuses: Counter[int] = Counter()
        self.route_ms: list[float] = []
        self.session_s: list[float] = []
        self.accepted: list[str] = []
        self.failures: list[str] = []
        self.samples: list[dict[str, float]] = []

    def answer(self, status: int) -> None:
        with self.lock:
            self.statuses[status] += 1

    def fail(self, message: str) -> None:
        with self.lock:
            if len(self.failures) < 100:
                self.failures.append(message)


def run_load(base_url: str, *, catalog_id: str, queries: list[str], options: LoadOptions,
             server_pid: int | None = None, cache_cap_bytes: float | None = None) -> LoadReport:
    """Drive the server for `options.duration_s` and check what it answered."""
    tally = _Tally()
    stop = threading.Event()
    started = time.monotonic()
    deadline = started + options.duration_s
    threads = [threading.Thread(target=_route_client, name=f"route-{i}", daemon=True, args=(
        base_url, catalog_id, queries, deadline, tally, random.Random(options.seed + i)))
        for i in range(options.num_route_clients)]
    threads += [threading.Thread(target=_session_client, name=f"session-{i}", daemon=True,
                                 args=(base_url, catalog_id, queries, deadline, tally,
                                       random.Random(options.seed + 1000 + i),
                                       options.max_session_wait_s))
                for i in range(options.num_session_clients)]
    sampler = threading.Thread(target=_sample, args=(base_url, server_pid, options.sample_s,
                                                     stop, tally), daemon=True)
    sampler.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=options.duration_s + options.max_session_wait_s + REQUEST_TIMEOUT_S)
        if t.is_alive():
            tally.fail(f"client {t.name} did not stop")
    elapsed = time.monotonic() - started
    stop.set()
    sampler.join(timeout=10)
    report = LoadReport(duration_s=elapsed)
    _check_sessions(base_url, tally, report)
    _summarise(tally, report, options.duration_s, cache_cap_bytes)
    return report


def _route_client(base_url: str, catalog_id: str, queries: list[str], deadline: float,
                  tally: _Tally, rng: random.Random) -> None:
    with httpx.Client(base_url=base_url, timeout=REQUEST_TIMEOUT_S) as client:
        while time.monotonic() < deadline:
            body = {"catalog": catalog_id, "query": rng.choice(queries)}
            sent = time.perf_counter()
            response = _request(client, tally, "POST", "/v1/route", json=body)
            if response is None:
                continue
            if response.status_code == 200:
                with tally.lock:
                    tally.route_ms.append((time.perf_counter() - sent) * 1e3)
            elif response.status_code == 429:
                time.sleep(min(float(response.headers.get("retry-after", 1)), MAX_BACKOFF_S))


def _session_client(base_url: str, catalog_id: str, queries: list[str], deadline: float,
                    tally: _Tally, rng: random.Random, max_wait_s: float) -> None:
    with httpx.Client(base_url=base_url, timeout=REQUEST_TIMEOUT_S) as client:
        while time.monotonic() < deadline:
            created = _request(client, tally, "POST", "/v1/sessions", json={
                "catalog": catalog_id, "task": rng.choice(queries), "auto_approve": True,
                "limits": {"max_steps": 8}})
            if created is None or created.status_code != 201:
                if created is not None and created.status_code == 429:
                    time.sleep(min(float(created.headers.get("retry-after", 1)),
                                   MAX_BACKOFF_S))
                continue
            sid = created.json()["id"]
            began = time.monotonic()
            with tally.lock:
                tally.accepted.append(sid)
            while time.monotonic() - began < max_wait_s:
                view = _request(client, tally, "GET", f"/v1/sessions/{sid}")
                if view is not None and view.status_code == 200 and \
                        view.json()["status"] in FINAL:
                    with tally.lock:
                        tally.session_s.append(time.monotonic() - began)
                    break
                time.sleep(0.2)


def _request(client: httpx.Client, tally: _Tally, method: str, path: str,
             **kwargs: Any) -> httpx.Response | None:
    try:
        response = client.request(method, path, **kwargs)
    except httpx.HTTPError as e:
        tally.fail(f"{method} {path}: no answer ({e!r})")
        return None
    tally.answer(response.status_code)
    status = response.status_code
    if status == 429 and not response.headers.get("retry-after", "").isdigit():
        tally.fail(f"{method} {path}: 429 without a Retry-After of whole seconds")
    elif status >= 400 and status != 429:
        tally.fail(f"{method} {path}: {status} {response.text[:200]}")
    return response


def _sample(base_url: str, pid: int | None, every_s: float, stop: threading.Event,
            tally: _Tally) -> None:
    with httpx.Client(base_url=base_url, timeout=30) as client:
        while not stop.wait(every_s):
            sample: dict[str, float] = {"rss_mb": rss_mb(pid or os.getpid())}
            try:
                text = client.get("/metrics").text
            except httpx.HTTPError:
                continue
            for name, value in _METRIC.findall(text):
                sample[name] = sample.get(name, 0.0) + float(value)
            with tally.lock:
                tally.samples.append(sample)


def rss_mb(pid: int) -> float:
    """Resident memory of a process, MiB (Linux /proc)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _check_sessions(base_url: str, tally: _Tally, report: LoadReport) -> None:
    with httpx.Client(base_url=base_url, timeout=60) as client:
        statuses: dict[str, str] = {}
        offset = 0
        while True:
            page = client.get("/v1/sessions", params={"limit": 1000, "offset": offset})
            rows = page.json()["sessions"]
            statuses.update({r["id"]: r["status"] for r in rows})
            if len(rows) < 1000:
                break
            offset += 1000
    report.sessions_accepted = len(tally.accepted)
    finished: Counter[str] = Counter()
    for sid in tally.accepted:
        status = statuses.get(sid)
        if status is None:
            report.sessions_lost += 1
            tally.fail(f"session {sid} was accepted (201) and is gone")
        elif status not in FINAL:
            report.sessions_lost += 1
            tally.fail(f"session {sid} is still {status} after the wait")
        else:
            finished[status] += 1
    report.sessions_finished = dict(finished)


def _summarise(tally: _Tally, report: LoadReport, duration_s: float,
               cache_cap_bytes: float | None) -> None:
    report.statuses = dict(tally.statuses)
    report.requests = sum(tally.statuses.values())
    report.rejected_429 = tally.statuses.get(429, 0)
    report.route_ok = len(tally.route_ms)
    report.route_per_s = report.route_ok / duration_s
    if tally.route_ms:
        report.route_p50_ms = percentile(tally.route_ms, 50)
        report.route_p95_ms = percentile(tally.route_ms, 95)
        report.route_p99_ms = percentile(tally.route_ms, 99)
    if tally.session_s:
        report.session_p50_s = statistics.median(tally.session_s)
    samples = tally.samples
    depths = [s.get("stackroute_queue_depth", 0.0) for s in samples]
    if depths:
        report.queue_depth_max = max(depths)
        report.queue_depth_mean = statistics.fmean(depths)
    rss = [s["rss_mb"] for s in samples if s.get("rss_mb")]
    if rss:
        report.rss_mb_first, report.rss_mb_max, report.rss_mb_last = rss[0], max(rss), rss[-1]
        report.rss_mb_mid = rss[len(rss) // 2]
    cache = [s.get("stackroute_prefix_cache_bytes", 0.0) for s in samples]
    report.cache_mb_max = max(cache, default=0.0) / 2**20
    report.cache_evictions = max((s.get("stackroute_prefix_cache_evictions_total", 0.0)
                                  for s in samples), default=0.0)
    if cache_cap_bytes is not None:
        report.cache_cap_mb = cache_cap_bytes / 2**20
        if max(cache, default=0.0) > cache_cap_bytes:
            tally.fail(f"the prefix cache held {report.cache_mb_max:.1f} MiB, over its "
                       f"{report.cache_cap_mb:.0f} MiB cap")
    if report.route_ok == 0:
        tally.fail("no routing call was answered")
    report.failures = list(tally.failures)


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (nearest rank) of `values`."""
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def load_queries(path: Path) -> list[str]:
    return [json.loads(line)["query"] for line in path.read_text().splitlines() if line.strip()]


def main(argv: list[str] | None = None) -> int:
    from stackroute.bench.reliability.load_engine import CACHE_BYTES_ENV
    from stackroute.bench.reliability.serve_process import ServerProcess

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="10 s, 3 routing + 2 session "
                                                             "clients")
    parser.add_argument("--duration", type=float, default=None)
    parser.add_argument("--route-clients", type=int, default=None)
    parser.add_argument("--session-clients", type=int, default=None)
    parser.add_argument("--max-queue", type=int, default=2)
    parser.add_argument("--max-concurrency", type=int, default=2)
    parser.add_argument("--cache-mib", type=float, default=16.0)
    parser.add_argument("--malloc-arena-max", type=int, default=0,
                        help="MALLOC_ARENA_MAX for the server (0: unset). 2 keeps glibc from "
                             "growing an arena per thread: RSS then levels off")
    parser.add_argument("--catalog", type=Path, default=EXAMPLES / "bank.catalog.json")
    parser.add_argument("--queries", type=Path, default=EXAMPLES / "bank.queries.jsonl")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    options = LoadOptions(
        duration_s=args.duration or (10.0 if args.smoke else 60.0),
        num_route_clients=args.route_clients or (3 if args.smoke else 8),
        num_session_clients=args.session_clients or (2 if args.smoke else 4))
    workdir = Path(tempfile.mkdtemp(prefix="stackroute-load-"))
    config = workdir / "serve.json"
    config.write_text(json.dumps({
        "engine": "stackroute.bench.reliability.load_engine:create", "max_queue": args.max_queue,
        "max_concurrency": args.max_concurrency, "log_level": "warning"}))
    cache_cap = args.cache_mib * 2**20
    server = ServerProcess(["--config", str(config), "--db", str(workdir / "load.db"),
                            "--catalog", str(args.catalog)], log_path=workdir / "serve.log",
                           env={CACHE_BYTES_ENV: str(int(cache_cap)), **(
                               {"MALLOC_ARENA_MAX": str(args.malloc_arena_max)}
                               if args.malloc_arena_max else {})}, ready_timeout_s=600)
    start_s = server.start()
    try:
        with httpx.Client(base_url=server.base_url, timeout=REQUEST_TIMEOUT_S) as client:
            catalog_id = client.get("/v1/catalogs").json()["catalogs"][0]["id"]
            queries = load_queries(args.queries)
            warm = client.post("/v1/route", json={"catalog": catalog_id, "query": queries[0]})
            warm.raise_for_status()  # outside the timed region
        report = run_load(server.base_url, catalog_id=catalog_id, queries=queries,
                          options=options, server_pid=server.pid, cache_cap_bytes=cache_cap)
    finally:
        server.stop()
    if args.json:
        print(json.dumps({**asdict(report), "is_ok": report.is_ok, "start_s": start_s},
                         indent=1))
    else:
        print(f"server ready in {start_s:.0f} s (model load); workdir {workdir}")
        print(report.summary())
    return 0 if report.is_ok else 1


if __name__ == "__main__":
    sys.exit(main())
