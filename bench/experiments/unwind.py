"""Unwinding in one pass measured: plain routing with `RouterOptions.unwinding` off and on,
side by side, on the semantic-overlap suite (32 leaves by default).

    stackroute bench unwind [--size 32] [--limit N] [--start parent|top|root]
        [--max-argument-tokens 64] [--out bench/out/unwind] [--smoke]

Every task is a free run (the model's own greedy decisions) of one query with the plain
policy, started at the gold leaf's parent router (`parent`, default: the descent is
teacher-forced with `start(at=…)`, so every single-tool request reaches a leaf and then
unwinds the whole stack), at the gold route's top branch (`top`) or at the root (`root`).
Confirmation gates are approved (as `run --auto-approve`). Per query both variants run on
one engine, in alternating order, each with the prefix cache emptied first. Reported:
decisions identical (routing decisions, arguments and trace shape equal, option
probabilities within 1e-4), model calls per request (argument generations included), the
levels the unwinding pass kept beyond its first, and wall time p50 (the whole run, and the
run less argument generation). Writes `tasks.jsonl` and `results.json`.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from stackroute.bench.engines import add_engine_options, engine_from_args
from stackroute.bench.environment import engine_environment, git_state
from stackroute.bench.workloads.datasets import generated_dataset
from stackroute.runtime.errors import InputError
from stackroute.runtime.governance import Limits, RunStatus
from stackroute.runtime.state import RunState
from stackroute.runtime.trace import EventKind
from stackroute.server.routing.options import DraftSource, RouterOptions
from stackroute.server.routing.router import build_machine
from stackroute.server.tools.evaluate import Query

log = logging.getLogger(__name__)

SEED = 0
SUITE = "semantic-overlap"
PROBABILITY_TOLERANCE = 1e-4


@dataclass
class Task:
    """One variant's run of one query."""

    query_id: str
    unwinding: bool
    order: int  # 0: ran first for this query
    status: str
    decisions: list[tuple[str | None, Any]]
    probabilities: list[dict[str, float]]
    events: list[str]
    model_calls: int
    routing_calls: int  # model calls less argument generations
    unwound_levels: int  # decisions handed out from an unwinding pass beyond its level 0
    passes: int  # unwinding passes run
    wall_ms: float
    routing_wall_ms: float  # wall less argument generation
    error: str | None = None


def start_at(query: Query, start: str) -> str:
    if start == "root" or not query.gold:
        return ""
    parts = query.gold[0].split("/")
    return parts[0] if start == "top" else "/".join(parts[:-1])


def run_task(engine: Any, data: Any, query: Query, *, unwinding: bool, order: int,
             start: str, limits: Limits, max_argument_tokens: int) -> Task:
    engine.cache.clear()
    machine = build_machine(data.tree, engine, limits=limits, style=data.style,
                            options=RouterOptions(recovery=None, speculation=DraftSource.OFF,
                                                  unwinding=unwinding,
                                                  max_argument_tokens=max_argument_tokens))
    started = time.perf_counter()
    try:
        state = machine.run(machine.start(query.query, run_id=query.id,
                                          at=start_at(query, start)))
        while state.status is RunStatus.PAUSED and state.pending is not None \
                and not state.pending.is_waiting_for_values:
            machine.approve(state, state.pending.digest)  # as `run --auto-approve`
            machine.run(state)
    except InputError as e:  # e.g. a prompt longer than the model's context
        wall = (time.perf_counter() - started) * 1e3
        return Task(query.id, unwinding, order, "error", [], [], [], 0, 0, 0, 0, wall, wall,
                    error=str(e))
    wall = (time.perf_counter() - started) * 1e3
    return task_of(state, query.id, unwinding=unwinding, order=order, wall_ms=wall)


def task_of(state: RunState, query_id: str, *, unwinding: bool, order: int,
            wall_ms: float) -> Task:
    routes = [e for e in state.trace if e.kind is EventKind.ROUTE]
    marks = [e.detail.get("unwinding") for e in routes]
    arguments = [e.arguments_call for e in routes if e.arguments_call is not None]
    argument_ms = sum(c.usage.latency_ms for c in arguments)
    return Task(
        query_id=query_id, unwinding=unwinding, order=order, status=state.status.value,
        decisions=[(e.decision, e.arguments) for e in routes],
        probabilities=[dict(e.probabilities or {}) for e in routes],
        events=[e.kind.value for e in state.trace],
        model_calls=state.usage.model_calls,
        routing_calls=state.usage.model_calls - len(arguments),
        unwound_levels=sum(1 for m in marks if m and m.get("level", 0) > 0),
        passes=sum(1 for m in marks if m and m.get("level") == 0),
        wall_ms=wall_ms, routing_wall_ms=wall_ms - argument_ms)


def is_identical(a: Task, b: Task) -> bool:
    if a.decisions != b.decisions or a.events != b.events:
        return False
    for mine, theirs in zip(a.probabilities, b.probabilities, strict=True):
        if mine.keys() != theirs.keys() or any(
                abs(mine[o] - theirs[o]) > PROBABILITY_TOLERANCE for o in mine):
            return False
    return True


def summarize(pairs: list[tuple[Task, Task]]) -> dict[str, Any]:
    """Over (off, on) pairs of the same query."""
    ok = [(off, on) for off, on in pairs if "error" not in (off.status, on.status)]
    if not ok:
        return {"queries": len(pairs), "errors": len(pairs)}
    offs, ons = [p[0] for p in ok], [p[1] for p in ok]

    def mean(tasks: list[Task], key: str) -> float:
        return statistics.mean(float(getattr(t, key)) for t in tasks)

    def p50(tasks: list[Task], key: str) -> float:
        return statistics.median(float(getattr(t, key)) for t in tasks)

    saved = [off.model_calls - on.model_calls for off, on in ok]
    unwound = [on.unwound_levels for on in ons]
    return {
        "queries": len(pairs), "errors": len(pairs) - len(ok),
        "identical": sum(is_identical(off, on) for off, on in ok), "compared": len(ok),
        "model_calls_mean": {"off": mean(offs, "model_calls"), "on": mean(ons, "model_calls")},
        "routing_calls_mean": {"off": mean(offs, "routing_calls"),
                               "on": mean(ons, "routing_calls")},
        "unwound_levels_mean": statistics.mean(unwound),
        "calls_saved_equal_levels_unwound": sum(s == u for s, u in zip(saved, unwound,
                                                                       strict=True)),
        "unwinding_passes": sum(on.passes for on in ons),
        "wall_ms_p50": {"off": p50(offs, "wall_ms"), "on": p50(ons, "wall_ms")},
        "routing_wall_ms_p50": {"off": p50(offs, "routing_wall_ms"),
                                "on": p50(ons, "routing_wall_ms")},
        "routing_wall_ms_mean": {"off": mean(offs, "routing_wall_ms"),
                                 "on": mean(ons, "routing_wall_ms")},
    }


def print_table(s: dict[str, Any]) -> None:
    if "compared" not in s:
        print(f"all {s['queries']} queries errored")
        return
    print(f"decisions identical: {s['identical']}/{s['compared']} "
          f"({s['errors']} errored of {s['queries']})")
    print(f"{'':<28}{'off':>10}{'on':>10}{'on/off':>8}")
    for key, label in (("model_calls_mean", "model calls / request"),
                       ("routing_calls_mean", "routing calls / request"),
                       ("wall_ms_p50", "wall ms p50"),
                       ("routing_wall_ms_p50", "routing wall ms p50"),
                       ("routing_wall_ms_mean", "routing wall ms mean")):
        off, on = s[key]["off"], s[key]["on"]
        print(f"{label:<28}{off:>10.2f}{on:>10.2f}{on / off if off else float('nan'):>8.2f}")
    print(f"levels unwound in one pass / request (mean): {s['unwound_levels_mean']:.2f}; "
          f"calls saved == levels unwound on {s['calls_saved_equal_levels_unwound']}/"
          f"{s['compared']} requests; unwinding passes: {s['unwinding_passes']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_engine_options(parser)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--size", type=int, default=32, help="leaves in the overlap suite")
    parser.add_argument("--limit", type=int, default=1000, help="queries (file order)")
    parser.add_argument("--start", choices=["parent", "top", "root"], default="parent")
    parser.add_argument("--max-steps", type=int, default=12)
    parser.add_argument("--max-argument-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("bench/out/unwind"))
    parser.add_argument("--smoke", action="store_true",
                        help="1 query on overlap-16, short arguments")
    args = parser.parse_args(argv)
    if args.smoke:
        args.limit, args.size, args.max_argument_tokens = 1, 16, 16
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    git = git_state()


    engine = engine_from_args(args, dtype=args.dtype, num_threads=args.threads)
    data = generated_dataset(SUITE, args.size, seed=SEED, limit=args.limit)
    limits = Limits(max_steps=args.max_steps)
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    # Warm-up outside the measured runs: compile the menus and schemas, touch the model.
    engine.prepare(data.tree)
    run_task(engine, data, data.queries[0], unwinding=True, order=0, start=args.start,
             limits=limits, max_argument_tokens=args.max_argument_tokens)
    pairs: list[tuple[Task, Task]] = []
    with open(args.out / "tasks.jsonl", "w", encoding="utf-8") as out:
        for i, query in enumerate(data.queries):
            ran: dict[bool, Task] = {}
            for order, unwinding in enumerate((False, True) if i % 2 == 0 else (True, False)):
                ran[unwinding] = run_task(engine, data, query, unwinding=unwinding,
                                          order=order, start=args.start, limits=limits,
                                          max_argument_tokens=args.max_argument_tokens)
            off, on = ran[False], ran[True]
            pairs.append((off, on))
            for task in (off, on):
                out.write(json.dumps({**asdict(task), "is_identical": is_identical(off, on)},
                                     default=str) + "\n")
            out.flush()
            log.info("%s: identical=%s calls %d -> %d (unwound %d) wall %.0f -> %.0f ms",
                     query.id, is_identical(off, on), off.model_calls, on.model_calls,
                     on.unwound_levels, off.wall_ms, on.wall_ms)
    summary = summarize(pairs)
    body = {"benchmark": "unwind_bench", "environment": engine_environment(engine, git=git),
            "suite": f"{SUITE}-{args.size}", "seed": SEED, "start": args.start,
            "max_steps": args.max_steps, "max_argument_tokens": args.max_argument_tokens,
            "elapsed_s": round(time.perf_counter() - started, 1), "summary": summary}
    (args.out / "results.json").write_text(json.dumps(body, indent=2) + "\n",
                                           encoding="utf-8")
    print_table(summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
