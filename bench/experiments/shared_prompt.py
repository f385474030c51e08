"""`stackroute bench shared-prompt`: the root's menu before the request vs after it (issue 29).

One long-lived process, product defaults (`stackroute eval`'s routing options for the model:
the guided policy with its calibration where one ships). The model is loaded once; each
prompt order gets its own engine over the same weights, with its own prefix cache, and its
own router pool (so neither order's cache or contrasts help the other). Per suite, the first
query warms both (not reported: "the second and later requests"); then every query runs under
both orders, alternating which goes first, so both see the same machine load. Reported per
suite and order: prompt, prefilled and cached tokens, model calls, p50/p95 request wall
time, routing and exact-call success on the same items, and how often the two orders called
the same leaves.

    stackroute bench shared-prompt --suites seal-test,cache-128,bank --limit 12 --out DIR
    stackroute bench shared-prompt --smoke          # the bank example, 3 queries
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from stackroute.runtime.catalog import load_catalog
from stackroute.runtime.prompt import PromptOrder
from stackroute.runtime.tree import CapabilityTree
from stackroute.server.routing.prefix_warming import WarmScope, warm_catalog
from stackroute.server.tools.evaluate import Query, read_queries, run_query, score

ROOT = Path(__file__).resolve().parents[2]
SEAL_DIR = ROOT.parent / "shared" / "data" / "seal-tools"
SUITE_NAMES = ("seal-test", "seal-dev", "cache-128", "bank", "overlap-32", "clean-32")
ORDERS = (PromptOrder.REQUEST_FIRST, PromptOrder.MENU_FIRST)


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
    from stackroute.bench.generate import generate_suite
    from stackroute.runtime.catalog import build_tree

    suite, size = generated[name]
    made = generate_suite(suite, num_leaves=size, seed=0)
    queries = [Query.from_record(q) for q in made.queries]
    return Suite(name, build_tree(made.catalog), evenly(queries, count))


class Side:
    """One prompt order: its engine (shared weights, own prefix cache) and router pool."""

    def __init__(self, order: PromptOrder, engine: Any, options: Any) -> None:
        from stackroute.server.routing.pool import RouterPool

        self.order = order
        self.engine = engine
        self.pool = RouterPool(engine, replace(options, prompt_order=order))

    def warm(self, tree: CapabilityTree, scope: WarmScope) -> dict[str, Any]:
        """What the service does when a catalog loads (`prefix_warming.py`)."""
        if scope is WarmScope.OFF:
            return {}
        report = warm_catalog(self.pool, tree, scope=scope)
        return {"order": self.order.value, "warm_menus": report.num_menus,
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
            return {"order": self.order.value, "id": query.id, "wall_ms": wall_ms,
                    "error": error, "success": False, "args_success": False}
        result = score(tree, query, state, wall_ms=wall_ms)
        return {"order": self.order.value, "id": query.id, "wall_ms": round(wall_ms, 1),
                "called": list(result.called), "gold": list(result.gold),
                "success": result.is_success, "args_success": result.is_args_success,
                "outcome": result.outcome, "usage": result.usage, "error": result.error}


def run_suite(suite: Suite, sides: Sequence[Side], out: Any, *, log: Any,
              warm: WarmScope = WarmScope.OFF) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for side in sides:
        warmed = side.warm(suite.tree, warm)
        if warmed:
            out.write(json.dumps({"suite": suite.name, "warm": warm.value, **warmed}) + "\n")
            log(f"{suite.name} warmed ({side.order.value}): {warmed['warm_ms']:.0f} ms")
    for index, query in enumerate(suite.queries):
        ordered = list(sides) if index % 2 == 0 else list(reversed(sides))
        for position, side in enumerate(ordered):
            row = {"suite": suite.name, "index": index,
                   "is_warmup": index < suite.num_warmup,
                   "position": position, **side.run(suite.tree, query)}
            rows.append(row)
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
            out.flush()
            log(f"{suite.name} #{index} {row['order']}: {row['wall_ms']:.0f} ms, "
                f"success={row['success']}, prefill="
                f"{row.get('usage', {}).get('prefill_tokens')}")
    return rows


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per suite and order over the reported (non-warm-up) queries that both orders ran,
    plus the new/old ratios."""
    out: dict[str, Any] = {}
    rows = [r for r in rows if "order" in r and "index" in r]  # not the warm-on-load lines
    for suite in dict.fromkeys(r["suite"] for r in rows):
        by_order: dict[str, Any] = {}
        mine_all = [r for r in rows if r["suite"] == suite and not r["is_warmup"]]
        # Only queries both orders finished (a run stopped midway leaves one unpaired).
        paired = {i for i, n in Counter(r["index"] for r in mine_all).items() if n == len(ORDERS)}
        kept = [r for r in mine_all if r["index"] in paired]
        for order in ORDERS:
            mine = [r for r in kept if r["order"] == order.value]
            if not mine:
                continue
            walls = sorted(r["wall_ms"] for r in mine)

            def mean(key: str, rows: list[dict[str, Any]] = mine) -> float:
                return statistics.fmean(r.get("usage", {}).get(key, 0) for r in rows)

            by_order[order.value] = {
                "num_queries": len(mine), "num_errors": sum(1 for r in mine if r.get("error")),
                "success": sum(r["success"] for r in mine) / len(mine),
                "args_success": sum(r["args_success"] for r in mine) / len(mine),
                "prompt_tokens_mean": mean("prompt_tokens"),
                "prefill_tokens_mean": mean("prefill_tokens"),
                "cached_tokens_mean": mean("cached_tokens"),
                "model_calls_mean": mean("model_calls"),
                "wall_ms_p50": statistics.median(walls),
                "wall_ms_p95": walls[min(len(walls) - 1, round(0.95 * (len(walls) - 1)))],
            }
        pairs = _pairs(kept)
        entry: dict[str, Any] = {"by_order": by_order, "num_pairs": len(pairs),
                                 "same_calls": sum(a.get("called") == b.get("called")
                                                   for a, b in pairs)}
        old, new = (by_order.get(o.value) for o in ORDERS)
        if old and new:
            entry["ratio_new_over_old"] = {
                k: new[k] / old[k] if old[k] else None
                for k in ("prefill_tokens_mean", "prompt_tokens_mean", "wall_ms_p50",
                          "wall_ms_p95", "model_calls_mean")}
        out[suite] = entry
    return out


def _pairs(rows: Sequence[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    by_index: dict[int, dict[str, dict[str, Any]]] = {}
    for r in rows:
        by_index.setdefault(r["index"], {})[r["order"]] = r
    return [(pair[ORDERS[0].value], pair[ORDERS[1].value]) for pair in by_index.values()
            if len(pair) == 2]


def build_sides(model: str | None, threads: int | None) -> list[Side]:
    from stackroute.server.engines.registry import create_engine
    from stackroute.server.engines.transformers_engine import TransformersEngine
    from stackroute.server.routing.calibration import router_options

    first = create_engine("transformers", model=model, num_threads=threads)
    if not isinstance(first, TransformersEngine):
        raise TypeError(f"expected the transformers engine, got {type(first).__name__}")
    # The same weights, a second prefix cache: neither order warms the other's prompts.
    second = TransformersEngine(loaded=first.loaded)
    options = router_options(first.info.model)
    return [Side(ORDERS[0], first, options), Side(ORDERS[1], second, options)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stackroute bench shared-prompt",
                                     description=__doc__.split("\n\n")[0])
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
    args = parser.parse_args(argv)
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
    sides = build_sides(args.model, args.threads)
    rows: list[dict[str, Any]] = []
    with open(out_dir / "items.jsonl", "a", encoding="utf-8") as out:
        for name in names:
            suite = load_suite(name, limit=limit, num_warmup=args.warmup_queries)
            rows += run_suite(suite, sides, out, log=log, warm=WarmScope(args.warm))
    summary = {"command": " ".join(["stackroute bench shared-prompt", *(argv or sys.argv[1:])]),
               "model": sides[0].engine.info.model,
               "routing": sides[0].pool.options.describe(),
               "wall_s": round(time.perf_counter() - started, 1),
               "suites": summarize(rows)}
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n",
                                          encoding="utf-8")
    print(json.dumps(summary, indent=2))
    return 1 if any(r.get("error") for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
