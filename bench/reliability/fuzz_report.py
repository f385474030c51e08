"""Bad input, full size: hostile catalogs and requests against the runtime and a real
`stackroute serve`, counting every case and every contract breach.

    stackroute bench fuzz            # thousands of cases per phase
    stackroute bench fuzz --smoke    # a few hundred in all
        [--seed S] [--json]

Phases: the table of named attacks (`fuzz_cases.ATTACKS`) through
`runtime.catalog.parse_catalog_text`; random hostile catalogs (hypothesis) through it; the
attacks and random catalogs through `POST /v1/catalogs`; hostile requests to every endpoint
(`fuzz_api`); schemathesis over the server's OpenAPI schema, positive and negative data. The
server is `stackroute serve` with the scripted engine
(`stackroute.bench.fixtures.scripted_engine`), so
thousands of requests take minutes, not hours. Nothing stops at the first failure: every
breach is counted, and the server's RSS is read before and after. Needs `hypothesis` and
`schemathesis` (the dev extra). Loopback only.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
from stackroute.bench.reliability.fuzz_api import (
    FuzzStats,
    run_cases,
    run_hostile_requests,
    run_schemathesis,
    seed_server,
)
from stackroute.bench.reliability.fuzz_cases import (
    ATTACKS,
    as_text,
    check_parse,
    check_upload,
    hostile_catalog_text,
)
from stackroute.bench.reliability.load_test import rss_mb
from stackroute.bench.reliability.serve_process import ServerProcess
from stackroute.runtime.catalog import DEFAULT_LIMITS, parse_catalog_text
from stackroute.runtime.errors import CatalogError

FULL = {"catalogs": 5_000, "http_catalogs": 1_000, "hostile": 3_000, "schemathesis": 50}
SMOKE = {"catalogs": 200, "http_catalogs": 50, "hostile": 150, "schemathesis": 4}


@dataclass
class FuzzReport:
    cases: dict[str, int] = field(default_factory=dict)  # by phase
    statuses: dict[int, int] = field(default_factory=dict)  # HTTP answers
    failures: list[str] = field(default_factory=list)
    slowest_answer_s: float = 0.0
    server_rss_mb_before: float = 0.0
    server_rss_mb_after: float = 0.0
    duration_s: float = 0.0

    @property
    def total(self) -> int:
        return sum(self.cases.values())

    @property
    def is_ok(self) -> bool:
        return not self.failures

    def summary(self) -> str:
        lines = [f"cases: {self.total} {self.cases}",
                 f"HTTP answers: {dict(sorted(self.statuses.items()))}, slowest "
                 f"{self.slowest_answer_s:.2f} s",
                 f"server RSS {self.server_rss_mb_before:.0f} MiB before, "
                 f"{self.server_rss_mb_after:.0f} MiB after; {self.duration_s:.0f} s",
                 "OK: every rejection a located problem or a 4xx naming it; no 5xx, no hang"
                 if self.is_ok else f"FAILED ({len(self.failures)}):\n  " + "\n  ".join(
                     self.failures[:30])]
        return "\n".join(lines)


def run_report(sizes: dict[str, int], *, seed: int = 0) -> FuzzReport:
    started = time.monotonic()
    report = FuzzReport()
    counts: Counter[str] = Counter()

    def guarded(phase: str, check: Callable[[Any], Any]) -> Callable[[Any], None]:
        def body(case: Any) -> None:
            counts[phase] += 1
            try:
                check(case)
            except Exception as e:  # counted, not raised: the run goes on
                if len(report.failures) < 200:
                    report.failures.append(f"[{phase}] {type(e).__name__}: {str(e)[:400]} "
                                           f"on {repr(case)[:200]}")
        return body

    for name, document, fmt, phrase in ATTACKS:
        guarded("attacks", lambda a: _check_attack(*a))((name, document, fmt, phrase))
    run_cases(hostile_catalog_text(), sizes["catalogs"], seed,
              guarded("catalogs", lambda case: check_parse(*case)))
    workdir = Path(tempfile.mkdtemp(prefix="stackroute-fuzz-"))
    config = workdir / "serve.json"
    config.write_text(json.dumps({"engine": "stackroute.bench.fixtures.scripted_engine:create",
                                  "max_queue": 8, "log_level": "warning"}))
    server = ServerProcess(["--config", str(config), "--db", str(workdir / "fuzz.db")],
                           log_path=workdir / "serve.log")
    server.start()
    try:
        pid = server.pid or 0
        with httpx.Client(base_url=server.base_url, timeout=30) as client:
            for attack in ATTACKS:
                guarded("http_attacks", lambda a: _check_http_attack(client, *a))(attack)
            run_cases(hostile_catalog_text(), sizes["http_catalogs"], seed,
                      guarded("http_catalogs", lambda case: check_upload(client, *case)))
        known = seed_server(server.base_url)
        report.server_rss_mb_before = rss_mb(pid)
        stats = FuzzStats()
        run_hostile_requests(server.base_url, known, max_examples=sizes["hostile"],
                             stats=stats, seed=seed)
        run_schemathesis(server.base_url, known, max_examples=sizes["schemathesis"],
                         stats=stats, seed=seed)
        report.server_rss_mb_after = rss_mb(pid)
        if not server.is_alive():
            report.failures.append(f"the server died:\n{server.log_tail()}")
    finally:
        server.stop()
    counts.update(stats.num_cases)
    report.cases = dict(counts)
    report.statuses = dict(stats.statuses)
    report.failures.extend(stats.failures)
    report.slowest_answer_s = stats.slowest_s
    report.duration_s = time.monotonic() - started
    return report


def _check_attack(name: str, document: Any, fmt: str, phrase: str) -> None:
    try:
        parse_catalog_text(as_text(document, fmt), fmt=fmt, limits=DEFAULT_LIMITS)
    except CatalogError as e:
        if phrase not in str(e) and not any(phrase in p.message for p in e.problems):
            raise AssertionError(f"{name}: the problems do not say {phrase!r}: {e}") from e
        return
    raise AssertionError(f"{name}: loaded")


def _check_http_attack(client: httpx.Client, name: str, document: Any, fmt: str,
                       phrase: str) -> None:
    text = as_text(document, fmt)
    status = check_upload(client, text, fmt)
    # a NUL is refused at the HTTP edge (400: no store can keep it) before the catalog checks
    expected = 400 if "\x00" in text or "\\u0000" in text else 422
    if status != expected:
        raise AssertionError(f"{name}: {status}, not {expected}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="a few hundred cases (CI size)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report = run_report(SMOKE if args.smoke else FULL, seed=args.seed)
    if args.json:
        print(json.dumps({**asdict(report), "total": report.total, "is_ok": report.is_ok},
                         indent=1))
    else:
        print(report.summary())
    return 0 if report.is_ok else 1


if __name__ == "__main__":
    sys.exit(main())
