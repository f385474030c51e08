"""Whole-request latency of two checkouts of stackroute, side by side in one run.

A user waits for the whole request: routing calls, argument generation, the unwinding, and
whatever the policy computes besides the model (evidence, embeddings). Each checkout runs in
its own long-lived worker process, exactly as its own `stackroute eval CATALOG QUERIES` runs
(same defaults: policy, speculation, engine), with one change: before each query the worker
waits for the parent's go, and it reports the query's wall time. The parent alternates which
checkout goes first per query, so both see the same machine load.

A checkout is a folder holding `runtime/`, `grammars/`, `server/` and `bench/` (a git worktree
of an older commit, say); the worker imports it through a throwaway `stackroute` namespace of
symlinks, with this interpreter's packages. `.` means the installed stackroute.

    git worktree add /tmp/old 0e52c79
    stackroute bench request-latency --checkout old=/tmp/old \\
        --checkout new=. \\
        --suite DIR_WITH_CATALOG_AND_QUERIES ... --limit 6 --out bench/results/<date>-<name>

`--forced SIZES` runs the same work on both sides instead: each checkout's own `stackroute
bench cache` (append-only layout, prefix cache on), every request teacher-forced along its
gold route, so both make the same routing calls, generate the leaf's arguments and unwind with
the same `DONE` calls; the rows compare what each commit's engine costs for identical work
(their free runs can differ in the work itself: an old default that answers DONE at the root
does none). The harness's own per-item wall time is reported (token counting excluded).
`--free NAME=FOLDER` adds a checkout whose product defaults (what `stackroute eval` runs with
no flags) run each of those requests free, in the same alternation: what a user of that
commit waits for, beside the cost of the identical forced work.

    stackroute bench request-latency --checkout old=/tmp/old \\
        --checkout new=. \\
        --free newfree=. --forced 16,128 --limit 6 --out bench/results/<date>-<name>
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from stackroute.bench.environment import environment
from stackroute.bench.experiments.request_latency_workers import FORCED_WORKER, FREE_WORKER, WORKER
from stackroute.bench.experiments.threads import busy_processes

PACKAGES = ("runtime", "grammars", "server", "bench")


@dataclass
class Worker:
    """One checkout's worker, driven item by item."""

    name: str
    process: subprocess.Popen[str]
    report: IO[str]
    log: IO[str]  # the worker's stderr
    rows: list[dict[str, Any]] = field(default_factory=list)

    def wait_ready(self) -> dict[str, Any] | None:
        """The item the worker waits to run (its id, and its text in `--forced` mode); None
        once it has no item left."""
        line = self.report.readline()
        if line:
            return dict(json.loads(line))
        if self.process.wait(timeout=600):
            self.log.seek(0)
            raise RuntimeError(f"{self.name}: worker failed ({self.process.returncode}): "
                               f"{self.log.read()[-3000:]}")
        return None

    def run_one(self) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write("go\n")
        self.process.stdin.flush()
        row = json.loads(self.report.readline())
        self.rows.append(row)
        return row

    def finish(self) -> str:
        """The worker's stdout once every item has run."""
        out, _ = self.process.communicate(timeout=600)
        if self.process.returncode:
            self.log.seek(0)
            raise RuntimeError(f"{self.name}: worker failed ({self.process.returncode}): "
                               f"{self.log.read()[-2000:]}")
        return out


def namespace_for(checkout: Path, root: Path) -> Path | None:
    """A folder to put on PYTHONPATH whose `stackroute/` links to the checkout's packages
    (None: use the installed stackroute)."""
    if checkout == Path("."):
        return None
    missing = [p for p in PACKAGES if not (checkout / p).is_dir()]
    if missing:
        raise SystemExit(f"--checkout {checkout}: expected the folders {', '.join(PACKAGES)}, "
                         f"missing {', '.join(missing)}")
    ns = root / checkout.name / "stackroute"
    ns.mkdir(parents=True)
    for package in PACKAGES:
        (ns / package).symlink_to(checkout.resolve() / package)
    return ns.parent


def start_worker(name: str, pythonpath: Path | None, script: str, args: list[str], *,
                 threads: int | None = None) -> Worker:
    """A worker process running `script` with `args`; `threads`: its torch threads (through
    OMP_NUM_THREADS), else the environment's."""
    read_fd, write_fd = os.pipe()
    log = tempfile.TemporaryFile("w+")  # noqa: SIM115 (the worker's; closed with it)
    env = dict(os.environ)
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    env["STACKROUTE_BENCH_REPORT_FD"] = str(write_fd)
    process = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
        env=env, cwd=tempfile.gettempdir(), pass_fds=(write_fd,))
    os.close(write_fd)
    return Worker(name, process, os.fdopen(read_fd), log)


def suite_files(folder: Path) -> tuple[Path, Path]:
    catalogs = [p for p in folder.glob("*.catalog.json") if ".flat." not in p.name]
    queries = [p for p in folder.glob("*.queries.jsonl") if ".flat." not in p.name]
    if len(catalogs) != 1 or len(queries) != 1:
        raise SystemExit(f"--suite {folder}: expected one tree catalog and one queries file "
                         f"(stackroute bench generate), found {len(catalogs)} and "
                         f"{len(queries)}")
    return catalogs[0], queries[0]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    walls = [r["wall_ms"] for r in rows]
    return {"queries": len(rows), "wall_ms_p50": statistics.median(walls),
            "wall_ms_p95": percentile(walls, 0.95), "wall_ms_mean": statistics.fmean(walls),
            "model_calls_mean": statistics.fmean(r["model_calls"] for r in rows),
            "forward_passes_mean": statistics.fmean(r["forward_passes"] for r in rows),
            "generated_tokens_mean": statistics.fmean(r["generated_tokens"] for r in rows)}


def run_paired(label: str, workers: list[Worker], fed: Sequence[Worker] = ()) -> None:
    """Run the workers' items in step, alternating which goes first; every worker must be
    about to run the same item (same id, same text) or the pairing is refused. Each `fed`
    worker is sent every item as a job line (the first worker's ready line) and runs it with
    the others."""
    i = 0
    while True:
        ready = [w.wait_ready() for w in workers]
        if any(r is None for r in ready):
            if not all(r is None for r in ready):
                raise SystemExit(f"{label}: the checkouts ran out of items at different "
                                 f"points: {ready}")
            return  # the fed workers end when `finish` closes their stdin
        if any(r != ready[0] for r in ready[1:]):
            raise SystemExit(f"{label}: the checkouts are not on the same item: {ready}")
        for worker in fed:
            assert worker.process.stdin is not None
            worker.process.stdin.write(json.dumps(ready[0]) + "\n")
            worker.process.stdin.flush()
            answer = worker.wait_ready()
            if answer is None or answer["text"] != ready[0]["text"]:
                raise SystemExit(f"{label}: {worker.name} did not take the item: {answer}")
        everyone = [*workers, *fed]
        order = everyone if i % 2 == 0 else everyone[::-1]
        for worker in order:
            row = worker.run_one()
            print(f"{label} {row['id']} {worker.name}: {row['wall_ms']:,.0f} ms, "
                  f"{row['model_calls']} calls, {row['forward_passes']} passes, "
                  f"{row['generated_tokens']} generated, {row['called']}", flush=True)
        i += 1


def run_suite(folder: Path, checkouts: dict[str, Path | None], limit: int,
              ) -> dict[str, Any]:
    catalog, queries = suite_files(folder)
    workers = [start_worker(name, path, WORKER,
                            [str(catalog), str(queries), "--limit", str(limit)])
               for name, path in checkouts.items()]
    run_paired(folder.name, workers)
    result: dict[str, Any] = {"catalog": catalog.name}
    for worker in workers:
        eval_summary = json.loads(worker.finish().strip().splitlines()[-1])
        result[worker.name] = {**summarise(worker.rows), "success": eval_summary["success"],
                               "args_success": eval_summary["args_success"],
                               "rows": worker.rows}
    return result


def run_forced(sizes: str, checkouts: dict[str, Path | None], limit: int, threads: int | None,
               tmp: Path, free: dict[str, Path | None]) -> dict[str, dict[str, Any]]:
    """The checkouts' cache suites, item by item, and the `free` checkouts' product defaults
    on the same requests; results per catalog size."""
    thread_args = [] if threads is None else ["--threads", str(threads)]
    workers = [start_worker(name, path, FORCED_WORKER,
                            ["--sizes", sizes, "--limit", str(limit), *thread_args,
                             "--out", str(tmp / f"forced-{name}")])
               for name, path in checkouts.items()]
    fed = [start_worker(name, path, FREE_WORKER, [], threads=threads)
           for name, path in free.items()]
    run_paired("forced", workers, fed)
    for worker in workers:
        worker.finish()
    for worker in fed:
        worker.finish()
    workers += fed
    results: dict[str, dict[str, Any]] = {}
    for size in sizes.split(","):
        result: dict[str, Any] = {"catalog": f"scale-up, {size} tools (teacher-forced)"}
        for worker in workers:
            rows = [r for r in worker.rows if r["id"].startswith(f"{size}/")]
            result[worker.name] = {**summarise(rows), "rows": rows}
            if worker in fed:
                result[worker.name]["success"] = sum(r["success"] for r in rows) / max(
                    1, len(rows))
            else:
                result[worker.name]["args_success"] = sum(
                    r["args_success"] for r in rows) / max(1, len(rows))
        results[f"cache-{size}-forced"] = result
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stackroute bench request-latency",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--checkout", action="append", default=[],
                        help="NAME=FOLDER (a checkout) or NAME=. (the installed stackroute); "
                             "each worker runs its checkout's own default (embedded) engine")
    parser.add_argument("--suite", type=Path, action="append", default=[],
                        help="a folder from `stackroute bench generate` (free runs)")
    parser.add_argument("--forced", default=None, metavar="SIZES",
                        help="catalog sizes of the cache suite to run teacher-forced, "
                             "e.g. 16,128")
    parser.add_argument("--free", action="append", default=[], metavar="NAME=FOLDER",
                        help="with --forced: a checkout whose product defaults run the same "
                             "requests free, beside the forced rows")
    parser.add_argument("--limit", type=int, default=6, help="queries per suite or size")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads of each worker in --forced mode (--free too); "
                             "default: each checkout's own")
    parser.add_argument("--busy", type=int, default=0,
                        help="busy-loop processes kept running meanwhile (a shared machine)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--smoke", action="store_true",
                        help="the installed stackroute alone (here=.), one query of an 8-tool "
                             "generated suite")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        if args.smoke:
            from stackroute.bench.workloads.generate import generate_suite, write_suite

            args.checkout = args.checkout or ["here=."]
            args.limit = 1
            if not args.suite and not args.forced:
                smoke_suite = Path(tmp) / "scale-up-8"
                write_suite(generate_suite("scale-up", num_leaves=8, seed=0), smoke_suite)
                args.suite = [smoke_suite]
        if not args.checkout:
            parser.error("name at least one --checkout NAME=FOLDER")
        if not args.suite and not args.forced:
            parser.error("name at least one --suite or --forced SIZES")
        checkouts: dict[str, Path | None] = {}
        free: dict[str, Path | None] = {}
        for flag, specs, into in (("--checkout", args.checkout, checkouts),
                                  ("--free", args.free, free)):
            for spec in specs:
                name, sep, folder = spec.partition("=")
                if not sep or not name or name in checkouts or name in free:
                    parser.error(f"{flag} expects NAME=FOLDER with a new NAME, got {spec!r}")
                into[name] = namespace_for(Path(folder), Path(tmp) / flag.strip("-"))
        if free and not args.forced:
            parser.error("--free needs --forced (it runs the forced items' requests)")
        with busy_processes(args.busy):
            results = {folder.name: run_suite(folder, checkouts, args.limit)
                       for folder in args.suite}
            if args.forced:
                results |= run_forced(args.forced, checkouts, args.limit, args.threads,
                                      Path(tmp), free)
    names = [*checkouts, *free] if args.forced else list(checkouts)
    summary: dict[str, Any] = {"suites": {}, "environment": environment(),
                               "busy_processes": args.busy}
    for suite, result in results.items():
        here = [n for n in names if n in result]
        line = {name: {k: v for k, v in result[name].items() if k != "rows"} for name in here}
        base = result[here[0]]["wall_ms_p50"]
        line["p50_ratio_to_" + here[0]] = {n: result[n]["wall_ms_p50"] / base for n in here}
        summary["suites"][suite] = line
    print(json.dumps(summary, indent=1))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
        (args.out / "rows.json").write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
