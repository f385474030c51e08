"""Speculative routing measured: step-by-step (cache off), step-by-step (cache on) and
speculative routing with drafts from leaf evidence, from the route cache, or both.

    stackroute bench speculation [--sizes 32 128 512] [--limit 4] [--seal 4]
        [--start root top] [--out bench/out/speculation] [--smoke]

Every task is a free run (the model's own decisions, greedy) of one query, from the root
(`root`) or from the gold route's top-level branch (`top`: `start(at=…)`, as if the model had
chosen it; the tiny embedded model answers DONE at the root for most requests, so `root`
alone rarely reaches a second level). Variants, each with the engine's prefix cache emptied
before every task so none inherits another's prefill:

- `steps-no-cache`, `steps-cache`: plain routing, one constrained call per menu;
- `spec-evidence`: drafts from the leaf-embedding index only (a request seen the first time);
- `spec-routes`: drafts from a route cache holding what `steps-cache` chose for this same
  request (a repeated request), nothing else;
- `spec-both`: that route cache first, evidence where it has no draft.

Per task: the descent (the routing calls up to the first leaf chosen: the route proper, as
the paper counts it) in forward passes and model ms; all routing forward passes (every pass
minus those generating leaf arguments) and routing wall ms (wall minus argument generation),
covering the calls that unwind the stack too; levels speculated and accepted; and the
identity check: the task's routing decisions and arguments equal `steps-cache`'s, option
probabilities within 1e-4. Writes `results.json` and `tasks.jsonl` under `--out`.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stackroute.bench.engines import add_engine_options, build_engine, needs_transformers
from stackroute.bench.environment import engine_environment, git_state
from stackroute.bench.workloads.datasets import Dataset, generated_dataset, seal_dataset
from stackroute.runtime.errors import InputError
from stackroute.runtime.governance import Limits
from stackroute.runtime.state import RunState
from stackroute.runtime.trace import EventKind
from stackroute.server.embeddings.leaf_index import EvidenceSource
from stackroute.server.routing.options import DraftSource, RouterOptions
from stackroute.server.routing.router import build_machine, evidence_for_tree
from stackroute.server.routing.speculator import RouteCache
from stackroute.server.tools.evaluate import Query

log = logging.getLogger(__name__)

SEED = 0
PROBABILITY_TOLERANCE = 1e-4
VARIANTS = ("steps-no-cache", "steps-cache", "spec-evidence", "spec-routes", "spec-both")
SOURCES = {"steps-no-cache": DraftSource.OFF, "steps-cache": DraftSource.OFF,
           "spec-evidence": DraftSource.EVIDENCE, "spec-routes": DraftSource.ROUTES,
           "spec-both": DraftSource.BOTH}


@dataclass
class Task:
    """One variant's run of one query."""

    dataset: str
    start: str
    variant: str
    query_id: str
    decisions: list[tuple[str | None, Any]]
    probabilities: list[dict[str, float]]
    routing_passes: int
    descent_passes: int  # routing passes up to the first leaf chosen (the route proper)
    descent_ms: float  # model time of those routing calls
    reached_leaf: bool
    argument_passes: int
    routing_ms: float
    wall_ms: float
    routing_calls: int
    speculated: int
    accepted: int
    status: str
    error: str | None = None
    is_identical: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "probabilities"}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Task:
        """A recorded task (its identity verdict kept; probabilities are not recorded)."""
        return cls(**{**data, "decisions": [tuple(d) for d in data["decisions"]],
                      "probabilities": []})


def summarize_file(path: Path) -> dict[str, Any]:
    """Results by dataset, start and variant from a `tasks.jsonl` (a run cut short, or
    several runs' files concatenated)."""
    grouped: dict[str, dict[str, dict[str, list[Task]]]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            task = Task.from_dict(json.loads(line))
            by_start = grouped.setdefault(task.dataset, {}).setdefault(task.start, {})
            by_start.setdefault(task.variant, []).append(task)
    return {name: {start: {v: summarize(by_variant.get(v, [])) for v in VARIANTS}
                   for start, by_variant in by_start.items()}
            for name, by_start in grouped.items()}


def datasets(sizes: Sequence[int], *, limit: int, seal: int) -> list[Dataset]:
    out = [generated_dataset("scale-up", size, seed=SEED, limit=limit) for size in sizes]
    if seal:
        out.append(seal_dataset(single=seal, multi=0))
    return out


def start_at(query: Query, start: str) -> str:
    if start == "root" or not query.gold:
        return ""
    return query.gold[0].split("/")[0]


def run_task(engine: Any, data: Dataset, query: Query, start: str, variant: str, *,
             evidence: EvidenceSource, route_cache: RouteCache | None, limits: Limits,
             max_argument_tokens: int) -> tuple[Task, RunState | None]:
    engine.cache.clear()
    machine = build_machine(data.tree, engine, limits=limits, style=data.style,
                            options=RouterOptions(recovery=None, speculation=SOURCES[variant],
                                                  max_argument_tokens=max_argument_tokens),
                            evidence=evidence, route_cache=route_cache)
    started = time.perf_counter()
    try:
        state = machine.run(machine.start(query.query, run_id=query.id,
                                          at=start_at(query, start)))
    except InputError as e:  # e.g. a prompt longer than the model's context
        wall = (time.perf_counter() - started) * 1e3
        return Task(data.name, start, variant, query.id, [], [], 0, 0, 0.0, False, 0, wall,
                    wall, 0, 0, 0, "error", error=str(e)), None
    wall = (time.perf_counter() - started) * 1e3
    routes = [e for e in state.trace if e.kind is EventKind.ROUTE]
    calls = [e.arguments_call for e in routes]
    argument_passes = sum(c.usage.forward_passes for c in calls if c is not None)
    argument_ms = sum(c.usage.latency_ms for c in calls if c is not None)
    leaf_at = next((i for i, c in enumerate(calls) if c is not None), None)
    descent = routes if leaf_at is None else routes[:leaf_at + 1]
    descent_passes = sum(int((e.usage or {}).get("forward_passes", 0))
                         - (0 if e.arguments_call is None
                            else e.arguments_call.usage.forward_passes) for e in descent)
    descent_ms = sum(float((e.usage or {}).get("latency_ms", 0.0))
                     - (0.0 if e.arguments_call is None
                        else e.arguments_call.usage.latency_ms) for e in descent)
    usage = state.usage
    return Task(
        dataset=data.name, start=start, variant=variant, query_id=query.id,
        decisions=[(e.decision, e.arguments) for e in routes],
        probabilities=[dict(e.probabilities or {}) for e in routes],
        routing_passes=usage.forward_passes - argument_passes, descent_passes=descent_passes,
        descent_ms=descent_ms, reached_leaf=leaf_at is not None, argument_passes=argument_passes,
        routing_ms=wall - argument_ms, wall_ms=wall,
        routing_calls=sum(int((e.usage or {}).get("model_calls", 0)) for e in routes)
        - sum(1 for c in calls if c is not None),
        speculated=usage.speculated_levels, accepted=usage.accepted_levels,
        status=state.status.value), state


def warm_routes(state: RunState, cache: RouteCache) -> None:
    """Record the leaves `state`'s run chose, by call number, as a repeated request would
    find them."""
    calls = 0
    for event in state.trace:
        if event.kind is EventKind.LEAF_RESULT:
            calls += 1
        elif event.kind is EventKind.ROUTE and event.arguments_call is not None:
            cache.remember(state.task, f"{event.path}/{event.decision}".strip("/"),
                           call_number=calls)


def is_identical(task: Task, reference: Task) -> bool:
    if task.decisions != reference.decisions:
        return False
    for mine, theirs in zip(task.probabilities, reference.probabilities, strict=True):
        if mine.keys() != theirs.keys():
            return False
        if any(abs(mine[o] - theirs[o]) > PROBABILITY_TOLERANCE for o in mine):
            return False
    return True


def summarize(tasks: Sequence[Task]) -> dict[str, Any]:
    ok = [t for t in tasks if t.status != "error"]
    if not ok:
        return {"tasks": len(tasks), "errors": len(tasks)}
    speculated = sum(t.speculated for t in ok)
    full = [t for t in ok if t.speculated and t.accepted == t.speculated]
    checked = [t for t in ok if t.is_identical is not None]
    return {
        "tasks": len(tasks), "errors": len(tasks) - len(ok),
        "routing_passes_mean": statistics.mean(t.routing_passes for t in ok),
        "reached_leaf": sum(t.reached_leaf for t in ok),
        "descent_passes_mean": statistics.mean(t.descent_passes for t in ok),
        "descent_ms_mean": statistics.mean(t.descent_ms for t in ok),
        "routing_calls_mean": statistics.mean(t.routing_calls for t in ok),
        "argument_passes_mean": statistics.mean(t.argument_passes for t in ok),
        "routing_ms_mean": statistics.mean(t.routing_ms for t in ok),
        "routing_ms_p50": statistics.median(t.routing_ms for t in ok),
        "wall_ms_mean": statistics.mean(t.wall_ms for t in ok),
        "speculated_levels": speculated, "accepted_levels": sum(t.accepted for t in ok),
        "acceptance": sum(t.accepted for t in ok) / speculated if speculated else None,
        "fully_accepted_tasks": len(full),
        "fully_accepted_levels_mean": statistics.mean(t.speculated for t in full)
        if full else None,
        "fully_accepted_descent_passes_mean": statistics.mean(
            t.descent_passes for t in full) if full else None,
        "identical": sum(bool(t.is_identical) for t in checked),
        "identity_checked": len(checked),
    }


def run_dataset(engines: dict[bool, Any], embedder: Any, data: Dataset, starts: Sequence[str],
                out_tasks: Any, *, limits: Limits, max_argument_tokens: int,
                ) -> dict[str, dict[str, Any]]:
    evidence = evidence_for_tree(data.tree, embedder)
    results: dict[str, dict[str, Any]] = {}
    for start in starts:
        tasks: dict[str, list[Task]] = {v: [] for v in VARIANTS}
        for query in data.queries:
            route_cache = RouteCache(embedder)
            ran: dict[str, Task] = {}
            for variant in VARIANTS:
                engine = engines[variant != "steps-no-cache"]
                task, state = run_task(
                    engine, data, query, start, variant, evidence=evidence,
                    route_cache=route_cache if SOURCES[variant] in (
                        DraftSource.ROUTES, DraftSource.BOTH) else None,
                    limits=limits, max_argument_tokens=max_argument_tokens)
                if variant == "steps-cache" and state is not None:
                    warm_routes(state, route_cache)
                ran[variant] = task
            reference = ran["steps-cache"]
            for variant, task in ran.items():
                if variant != "steps-cache" and "error" not in (task.status, reference.status):
                    task.is_identical = is_identical(task, reference)
                tasks[variant].append(task)
                out_tasks.write(json.dumps(task.to_dict(), default=str) + "\n")
            out_tasks.flush()
            log.info("%s %s %s: %s", data.name, start, query.id, " ".join(
                f"{v}={tasks[v][-1].routing_passes}p/{tasks[v][-1].routing_ms:.0f}ms"
                f"/{tasks[v][-1].accepted}of{tasks[v][-1].speculated}" for v in VARIANTS))
        results[start] = {v: summarize(t) for v, t in tasks.items()}
    return results


def print_table(results: dict[str, Any]) -> None:
    header = (f"{'variant':<16}{'descent passes':>15}{'descent ms':>12}{'x steps':>9}"
              f"{'routing passes':>15}{'routing ms':>12}{'x steps':>9}{'accept':>8}"
              f"{'full: n/levels/passes':>23}{'identical':>11}")
    for name, by_start in results.items():
        for start, rows in by_start.items():
            reached = rows["steps-cache"].get("reached_leaf", 0)
            print(f"\n{name}, from {start} ({rows['steps-cache']['tasks']} tasks, "
                  f"{reached} reached a leaf)")
            print(header)
            base = rows["steps-cache"].get("routing_ms_mean")
            base_descent = rows["steps-cache"].get("descent_ms_mean")
            for variant, s in rows.items():
                if "routing_passes_mean" not in s:
                    print(f"{variant:<16} all {s['tasks']} tasks errored")
                    continue
                ratio = s["routing_ms_mean"] / base if base else float("nan")
                descent_ratio = s["descent_ms_mean"] / base_descent if base_descent \
                    else float("nan")
                accept = "" if s["acceptance"] is None else f"{s['acceptance']:.2f}"
                full = "" if not s["fully_accepted_tasks"] else (
                    f"{s['fully_accepted_tasks']}/{s['fully_accepted_levels_mean']:.1f}/"
                    f"{s['fully_accepted_descent_passes_mean']:.1f}")
                ident = f"{s['identical']}/{s['identity_checked']}" \
                    if s["identity_checked"] else "ref"
                print(f"{variant:<16}{s['descent_passes_mean']:>15.2f}"
                      f"{s['descent_ms_mean']:>12.0f}{descent_ratio:>9.2f}"
                      f"{s['routing_passes_mean']:>15.2f}{s['routing_ms_mean']:>12.0f}"
                      f"{ratio:>9.2f}{accept:>8}{full:>23}{ident:>11}")


TRANSFORMERS_ONLY = "a cache-off twin over the same weights"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stackroute bench speculation",
                                     description=__doc__.split("\n\n")[0])
    add_engine_options(parser, transformers_only=TRANSFORMERS_ONLY)
    parser.add_argument("--sizes", type=int, nargs="*", default=[32, 128, 512])
    parser.add_argument("--limit", type=int, default=4, help="queries per scale-up catalog")
    parser.add_argument("--seal", type=int, default=4, help="Seal-Tools dev single-tool queries")
    parser.add_argument("--start", nargs="+", choices=["root", "top"], default=["root", "top"])
    parser.add_argument("--max-steps", type=int, default=6,
                        help="routing calls per task (every variant alike)")
    parser.add_argument("--max-argument-tokens", type=int, default=48)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--dtype", default="float32",
                        help="engine precision; the identity check compares probabilities to "
                             "1e-4, which only float32 holds across cache states (bfloat16's "
                             "logits move in steps of 0.125)")
    parser.add_argument("--out", type=Path, default=Path("bench/out/speculation"))
    parser.add_argument("--smoke", action="store_true",
                        help="32 leaves, 1 query, from top, 3 steps, short arguments")
    parser.add_argument("--summarize", type=Path, default=None, metavar="TASKS_JSONL",
                        help="run nothing: print the table of a recorded tasks.jsonl")
    args = parser.parse_args(argv)
    needs_transformers(args.engine, "speculation", TRANSFORMERS_ONLY)
    if args.summarize is not None:
        print_table(summarize_file(args.summarize))
        return 0
    if args.smoke:
        args.sizes, args.limit, args.seal, args.start = [32], 1, 0, ["top"]
        args.max_steps, args.max_argument_tokens = 3, 16
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    git = git_state()  # at start: what ran, even if commits land meanwhile

    from stackroute.server.embeddings.embedder import Embedder
    from stackroute.server.engines.transformers_engine import TransformersEngine

    cached = build_engine("transformers", args.model, num_threads=args.threads,
                          dtype=args.dtype)
    engines = {True: cached,
               False: TransformersEngine(loaded=cached.loaded, is_cache_enabled=False)}
    embedder = Embedder()
    limits = Limits(max_steps=args.max_steps)
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    results: dict[str, Any] = {}
    with open(args.out / "tasks.jsonl", "w", encoding="utf-8") as out_tasks:
        for data in datasets(args.sizes, limit=args.limit, seal=args.seal):
            results[data.name] = run_dataset(engines, embedder, data, args.start, out_tasks,
                                             limits=limits,
                                             max_argument_tokens=args.max_argument_tokens)
    body = {"benchmark": "speculation_bench",
            "environment": engine_environment(cached, git=git),
            "seed": SEED, "max_steps": args.max_steps,
            "max_argument_tokens": args.max_argument_tokens,
            "elapsed_s": round(time.perf_counter() - started, 1), "results": results}
    (args.out / "results.json").write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
    print_table(results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
