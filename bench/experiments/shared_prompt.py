"""`stackroute bench shared-prompt`: what a request prefills when its prompt is shared (issue 29).

Two comparisons, each side by side in one long-lived process with product defaults
(`stackroute eval`'s routing options for the model: the guided policy with its calibration
where one ships), except for what is compared:
- `--compare shortlist` (the default): every menu in full vs inner menus shortlisted where the
  evidence is sure (`server/routing/shortlist.py`), one side per `--margins` value, all in
  the product's prompt order;
- `--compare order`: the root's menu after the request (request-first) vs before it;
- `--compare release`: the product before issue 29 (`before`: request-first, full menus, the
  model's argument values) vs issue 29's layout alone (`layout`: menu-first + shortlists) vs
  the product now (`now`: `stackroute eval`'s options exactly; shared_prompt_sides.py).
The model is loaded once; each side gets its own engine over the same weights, with its own
prefix cache, and its own router pool (so no side's cache or contrasts help another). Per
suite, the first query warms every side (not reported: "the second and later requests");
then every query runs under every side, rotating which goes first, so all see the same
machine load. Reported per suite and side: prompt, prefilled and cached tokens, model calls,
p50/p95 request wall time, routing and exact-call success on the same items, how often each
side called the same leaves as the first side, and (shortlist) how many frames opened
shortlisted and how often the model answered OTHER.

    stackroute bench shared-prompt --suites seal-test --limit 50 --warm root --out DIR
    stackroute bench shared-prompt --compare order --suites seal-test,cache-128,bank
    stackroute bench shared-prompt --compare release --suites seal-test --limit 50 --warm root
    stackroute bench shared-prompt --smoke          # the bank example, 2 reported queries
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from stackroute.bench.experiments.shared_prompt_sides import (
    Comparison,
    SideSpec,
    describe,
    side_specs,
)
from stackroute.runtime.catalog import load_catalog
from stackroute.runtime.menu import CompletionState
from stackroute.runtime.state import RunState
from stackroute.runtime.trace import EventKind
from stackroute.runtime.tree import CapabilityTree
from stackroute.server.routing.prefix_warming import WarmScope, warm_catalog
from stackroute.server.tools.evaluate import Query, read_queries, run_query, score

ROOT = Path(__file__).resolve().parents[2]
SEAL_DIR = ROOT.parent / "shared" / "data" / "seal-tools"
SUITE_NAMES = ("seal-test", "seal-dev", "cache-128", "bank", "overlap-32", "clean-32")


@dataclass(frozen=True)
class Suite:
    name: str
    tree: CapabilityTree
    queries: list[Query]  # the first `num_warmup` warm up and are not reported
    num_warmup: int = 1


def evenly(items: Sequence[Query], count: int) -> list[Query]:
    """`count` items spread evenly across `items` (the first included), in file order."""
    if count >= len(items):
        return list(items)
    step = len(items) / count
    return [items[int(i * step)] for i in range(count)]


def load_suite(name: str, *, limit: int, seal_dir: Path = SEAL_DIR,
               num_warmup: int = 1) -> Suite:
    """`limit` reported queries of suite `name` plus `num_warmup` warm-up queries first."""
    suite = _load_suite(name, count=limit + num_warmup, seal_dir=seal_dir)
    return replace(suite, num_warmup=num_warmup)


def _load_suite(name: str, *, count: int, seal_dir: Path) -> Suite:
    if name in ("seal-test", "seal-dev"):
        split = "test" if name == "seal-test" else "dev"
        singles = [q for q in read_queries(seal_dir / f"{split}.queries.jsonl")
                   if "single-tool" in q.tags]
        return Suite(name, load_catalog(seal_dir / "seal-tools.catalog.json"),
                     evenly(singles, count))
    if name == "bank":
        return Suite(name, load_catalog(ROOT / "examples" / "bank.catalog.json"),
                     read_queries(ROOT / "examples" / "bank.queries.jsonl")[:count])
    generated = {"cache-128": ("scale-up", 128), "overlap-32": ("semantic-overlap", 32),
                 "clean-32": ("clean-semantic", 32)}
    if name not in generated:
        raise ValueError(f"unknown suite {name!r}; known: {', '.join(SUITE_NAMES)}")
    from stackroute.bench.workloads.generate import generate_suite
    from stackroute.runtime.catalog import build_tree

    suite, size = generated[name]
    made = generate_suite(suite, num_leaves=size, seed=0)
    queries = [Query.from_record(q) for q in made.queries]
    return Suite(name, build_tree(made.catalog), evenly(queries, count))


def shortlist_counts(state: RunState) -> dict[str, int]:
    """Frames opened shortlisted, and routing answers OTHER (the full menu asked for)."""
    return {"shortlisted_frames": sum(1 for e in state.trace
                                      if e.kind in (EventKind.START, EventKind.PUSH)
                                      and "shortlist" in e.detail),
            "other_answers": sum(1 for e in state.trace if e.kind is EventKind.ROUTE
                                 and e.decision == CompletionState.OTHER),
            "frames": sum(1 for e in state.trace
                          if e.kind in (EventKind.START, EventKind.PUSH))}


class Side:
    """One side: its engine (shared weights, own prefix cache) and router pool."""

    def __init__(self, spec: SideSpec, engine: Any) -> None:
        from stackroute.server.routing.pool import RouterPool

        self.label = spec.label
        self.engine = engine
        self.pool = RouterPool(engine, spec.options)

    def warm(self, tree: CapabilityTree, scope: WarmScope) -> dict[str, Any]:
        """What the service does when a catalog loads (`prefix_warming.py`)."""
        if scope is WarmScope.OFF:
            return {}
        report = warm_catalog(self.pool, tree, scope=scope)
        return {"side": self.label, "warm_menus": report.num_menus,
                "warm_ms": round(report.wall_ms, 1), "warm_usage": report.usage.to_dict()}

    def run(self, tree: CapabilityTree, query: Query) -> dict[str, Any]:
        machine = self.pool.machine(tree)
        started = time.perf_counter()
        error = None
        try:
            state = run_query(machine, query)
        except Exception as e:  # counted, not fatal: the other items still run
            error = f"{type(e).__name__}: {e}"
            state = None
        wall_ms = (time.perf_counter() - started) * 1e3
        if state is None:
            return {"side": self.label, "id": query.id, "wall_ms": wall_ms,
                    "error": error, "success": False, "args_success": False}
        result = score(tree, query, state, wall_ms=wall_ms)
        return {"side": self.label, "id": query.id, "wall_ms": round(wall_ms, 1),
                "called": list(result.called), "gold": list(result.gold),
                "success": result.is_success, "args_success": result.is_args_success,
                "outcome": result.outcome, "usage": result.usage, "error": result.error,
                **shortlist_counts(state)}


def run_suite(suite: Suite, sides: Sequence[Side], out: Any, *, log: Any,
              warm: WarmScope = WarmScope.OFF,
              finished: frozenset[int] = frozenset()) -> list[dict[str, Any]]:
    """Run every side on each query, rotating which goes first; reported queries whose index
    is in `finished` (an earlier, stopped run's) are skipped, warm-up queries never are."""
    rows: list[dict[str, Any]] = []
    for side in sides:
        warmed = side.warm(suite.tree, warm)
        if warmed:
            out.write(json.dumps({"suite": suite.name, "warm": warm.value, **warmed}) + "\n")
            log(f"{suite.name} warmed ({side.label}): {warmed['warm_ms']:.0f} ms")
    for index, query in enumerate(suite.queries):
        if index in finished and index >= suite.num_warmup:
            continue
        shift = index % len(sides)
        ordered = list(sides[shift:]) + list(sides[:shift])
        for position, side in enumerate(ordered):
            row = {"suite": suite.name, "index": index,
                   "is_warmup": index < suite.num_warmup,
                   "position": position, **side.run(suite.tree, query)}
            rows.append(row)
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
            out.flush()
            log(f"{suite.name} #{index} {row['side']}: {row['wall_ms']:.0f} ms, "
                f"success={row['success']}, prefill="
                f"{row.get('usage', {}).get('prefill_tokens')}, "
                f"shortlisted={row.get('shortlisted_frames')}, other={row.get('other_answers')}")
    return rows


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per suite and side over the reported (non-warm-up) queries every side ran, plus each
    side's ratios to the first side (the baseline) and its calls compared with the
    baseline's."""
    out: dict[str, Any] = {}
    rows = [r for r in rows if "side" in r and "index" in r]  # not the warm-on-load lines
    for suite in dict.fromkeys(r["suite"] for r in rows):
        mine_all = [r for r in rows if r["suite"] == suite and not r["is_warmup"]]
        labels = side_order(r for r in rows if r["suite"] == suite)
        # Only queries every side finished (a run stopped midway leaves some unmatched).
        paired = {i for i, n in Counter(r["index"] for r in mine_all).items()
                  if n == len(labels)}
        kept = [r for r in mine_all if r["index"] in paired]
        by_side = {label: side_summary([r for r in kept if r["side"] == label])
                   for label in labels}
        entry: dict[str, Any] = {"by_side": by_side, "num_items": len(paired)}
        if labels:
            base = {r["index"]: r for r in kept if r["side"] == labels[0]}
            for label in labels[1:]:
                side = [r for r in kept if r["side"] == label]
                old, new = by_side[labels[0]], by_side[label]
                entry.setdefault("vs_first", {})[label] = {
                    "same_calls": sum(r.get("called") == base[r["index"]].get("called")
                                      for r in side),
                    **{f"ratio_{k}": new[k] / old[k] if old[k] else None
                       for k in ("prefill_tokens_mean", "prompt_tokens_mean", "wall_ms_p50",
                                 "wall_ms_p95", "model_calls_mean")}}
        out[suite] = entry
    return out


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a run's items.jsonl."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()]


def reported_rows(rows: Iterable[dict[str, Any]], suite: str) -> list[dict[str, Any]]:
    """`suite`'s rows of reported queries (not warm-up queries, not warm-on-load lines)."""
    return [r for r in rows if r.get("suite") == suite and "side" in r and "index" in r
            and not r["is_warmup"]]


def finished_indices(rows: Iterable[dict[str, Any]], suite: str,
                     num_sides: int) -> frozenset[int]:
    """Indices of `suite`'s reported queries that all `num_sides` sides finished."""
    counts = Counter(r["index"] for r in reported_rows(rows, suite))
    return frozenset(i for i, n in counts.items() if n == num_sides)


def side_order(rows: Iterable[dict[str, Any]]) -> list[str]:
    """The sides in the order they were built (the first is the baseline): query `index`
    ran them rotated by `index`, so a row's side was built at `(position + index) % n`."""
    rows = list(rows)
    count = len({r["side"] for r in rows})
    built = {r["side"]: (r["position"] + r["index"]) % count for r in rows if "position" in r}
    return sorted(built, key=built.__getitem__)


def side_summary(mine: list[dict[str, Any]]) -> dict[str, Any]:
    if not mine:
        return {"num_queries": 0}
    walls = sorted(r["wall_ms"] for r in mine)

    def mean(key: str) -> float:
        return statistics.fmean(r.get("usage", {}).get(key, 0) for r in mine)

    return {
        "num_queries": len(mine), "num_errors": sum(1 for r in mine if r.get("error")),
        "success": sum(r["success"] for r in mine) / len(mine),
        "args_success": sum(r["args_success"] for r in mine) / len(mine),
        "prompt_tokens_mean": mean("prompt_tokens"),
        "prefill_tokens_mean": mean("prefill_tokens"),
        "cached_tokens_mean": mean("cached_tokens"),
        "model_calls_mean": mean("model_calls"),
        "wall_ms_p50": statistics.median(walls),
        "wall_ms_p95": walls[min(len(walls) - 1, round(0.95 * (len(walls) - 1)))],
        "frames": sum(r.get("frames", 0) for r in mine),
        "shortlisted_frames": sum(r.get("shortlisted_frames", 0) for r in mine),
        "other_answers": sum(r.get("other_answers", 0) for r in mine),
    }


def build_sides(compare: Comparison, margins: Sequence[float], model: str | None,
                threads: int | None) -> list[Side]:
    from stackroute.server.engines.registry import create_engine
    from stackroute.server.engines.transformers_engine import TransformersEngine

    first = create_engine("transformers", model=model, num_threads=threads)
    if not isinstance(first, TransformersEngine):
        raise TypeError(f"expected the transformers engine, got {type(first).__name__}")
    specs = side_specs(compare, first, margins)
    # The same weights, a prefix cache per side: no side warms another's prompts.
    engines = [first] + [TransformersEngine(loaded=first.loaded) for _ in specs[1:]]
    return [Side(spec, engine) for spec, engine in zip(specs, engines, strict=True)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stackroute bench shared-prompt",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--compare", default="shortlist", choices=[c.value for c in Comparison],
                        help="full menus vs shortlisted (per --margins), the two orders, or "
                             "the product before issue 29 vs its layout alone vs now")
    parser.add_argument("--margins", default="0.08",
                        help="comma-separated shortlist margins, one side each (shortlist)")
    parser.add_argument("--suites", default="seal-test,cache-128,bank",
                        help=f"comma-separated, of {', '.join(SUITE_NAMES)}")
    parser.add_argument("--limit", type=int, default=12,
                        help="reported queries per suite (one more warms up)")
    parser.add_argument("--smoke", action="store_true", help="bank, 2 reported queries")
    parser.add_argument("--warm", default="off", choices=[w.value for w in WarmScope],
                        help="warm each side on load first, as the service does")
    parser.add_argument("--warmup-queries", type=int, default=1,
                        help="queries run first and not reported")
    parser.add_argument("--model", default=None)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--from-items", type=Path, default=None,
                        help="only summarise a run's items.jsonl (one stopped early, too) "
                             "into summary-from-items.json beside it")
    parser.add_argument("--resume", action="store_true",
                        help="append to --out's items.jsonl, skipping the queries every side "
                             "already finished there (the same --compare, --suites, --limit)")
    args = parser.parse_args(argv)
    if args.from_items is not None:
        text = json.dumps(summarize(read_rows(args.from_items)), indent=2) + "\n"
        (args.from_items.parent / "summary-from-items.json").write_text(text, encoding="utf-8")
        print(text, end="")
        return 0
    names = ["bank"] if args.smoke else [s for s in args.suites.split(",") if s]
    limit = 2 if args.smoke else args.limit
    unknown = [n for n in names if n not in SUITE_NAMES]
    if unknown or limit < 1:
        parser.error(f"unknown suites {unknown}; known: {', '.join(SUITE_NAMES)}" if unknown
                     else "--limit must be at least 1")
    out_dir = args.out or ROOT / "bench" / "results" / "shared-prompt-latest"
    out_dir.mkdir(parents=True, exist_ok=True)

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    started = time.perf_counter()
    margins = [float(m) for m in args.margins.split(",") if m]
    sides = build_sides(Comparison(args.compare), margins, args.model, args.threads)
    items = out_dir / "items.jsonl"
    stored = read_rows(items) if args.resume and items.exists() else []
    rows: list[dict[str, Any]] = []
    with open(items, "a", encoding="utf-8") as out:
        for name in names:
            suite = load_suite(name, limit=limit, num_warmup=args.warmup_queries)
            finished = finished_indices(stored, name, len(sides))
            if finished:
                log(f"{name}: resuming, {len(finished)} queries already finished")
            rows += [r for r in reported_rows(stored, name) if r["index"] in finished]
            rows += run_suite(suite, sides, out, log=log, warm=WarmScope(args.warm),
                              finished=finished)
    summary = {"command": " ".join(["stackroute bench shared-prompt", *(argv or sys.argv[1:])]),
               "model": sides[0].engine.info.model,
               "routing": {side.label: describe(side.pool.options) for side in sides},
               "wall_s": round(time.perf_counter() - started, 1),
               "suites": summarize(rows)}
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n",
                                          encoding="utf-8")
    print(json.dumps(summary, indent=2))
    return 1 if any(r.get("error") for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
