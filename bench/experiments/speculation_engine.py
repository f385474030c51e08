"""One verification pass vs step-by-step calls over the same route, engine only, side by side.

    stackroute bench speculation-engine [--sizes 128 512] [--limit 4]
        [--repeats 5] [--out bench/out/speculation-engine]

For each query of the generated scale-up catalogs, the model first routes step by step from
the gold route's top-level branch; where it went straight down to a leaf two or more levels
below (the route a right draft would propose), that route is timed both ways, alternating,
with the prefix cache emptied before every timing: `verify_path` over all its levels (one
forward pass) vs one `choose` per level (the cache carrying each level's prefix to the
next). Both see the same tokens; the difference is the passes. Decisions must be equal.
Prints the median of each and their ratio, per route and overall; writes `results.json`.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
from pathlib import Path
from typing import Any

from stackroute.bench.engines import add_engine_options, engine_from_args, needs_transformers
from stackroute.bench.environment import engine_environment, git_state
from stackroute.bench.workloads.generate import generate_suite
from stackroute.runtime.catalog import build_tree
from stackroute.runtime.governance import Limits
from stackroute.runtime.router import RoutingRequest
from stackroute.runtime.speculation import drafted_requests
from stackroute.runtime.trace import EventKind
from stackroute.runtime.tree import CapabilityTree
from stackroute.server.engines.verification import PathLevel
from stackroute.server.routing.options import DraftSource, RouterOptions
from stackroute.server.routing.router import build_machine

log = logging.getLogger(__name__)


def model_route(engine: Any, tree: CapabilityTree, task: str, at: str,
                ) -> tuple[RoutingRequest, list[str]] | None:
    """The first request at `at` and the names the model chose from there down to a leaf,
    if it went straight down (no BACK or DONE on the way) at least two levels."""
    machine = build_machine(tree, engine, limits=Limits(max_steps=8),
                            options=RouterOptions(recovery=None, speculation=DraftSource.OFF,
                                                  max_argument_tokens=8))
    state = machine.start(task, at=at)
    frame = state.top()
    first = RoutingRequest(run_id="bench", step=0, depth=len(state.stack) - 1, task=task,
                           node=tree.node(frame.node_path),
                           menu=machine.menu_for(state, frame),
                           prompt=machine.layout.routing_prompt(state), layout=machine.layout)
    machine.run(state)
    node, names = first.node, []
    for event in (e for e in state.trace if e.kind is EventKind.ROUTE):
        child = node.child(event.decision or "")
        if child is None:
            return None
        names.append(child.name)
        if child.is_leaf:
            return (first, names) if len(names) >= 2 else None
        node = child
    return None


def time_both(engine: Any, first: RoutingRequest, names: list[str], repeats: int,
              ) -> dict[str, Any]:
    requests = drafted_requests(first, names)
    levels = [PathLevel(r.prompt, r.menu.options, n)
              for r, n in zip(requests, names, strict=True)]
    one_pass, steps = [], []
    same = True
    for _ in range(repeats):
        engine.cache.clear()
        started = time.perf_counter()
        verified = engine.verify_path(levels)
        one_pass.append((time.perf_counter() - started) * 1e3)
        engine.cache.clear()
        started = time.perf_counter()
        stepped = [engine.choose(r.prompt, r.menu.options) for r in requests]
        steps.append((time.perf_counter() - started) * 1e3)
        same &= [v.choice for v in verified] == [s.choice for s in stepped] == names
    return {"levels": len(names), "tokens": engine.count_tokens(requests[-1].prompt),
            "one_pass_ms_p50": statistics.median(one_pass),
            "step_by_step_ms_p50": statistics.median(steps),
            "ratio": statistics.median(one_pass) / statistics.median(steps),
            "identical": same}


TRANSFORMERS_ONLY = "its prefix cache is emptied before every timing"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stackroute bench speculation-engine",
                                     description=__doc__.split("\n\n")[0])
    add_engine_options(parser, transformers_only=TRANSFORMERS_ONLY)
    parser.add_argument("--smoke", action="store_true", help="scale-up-16, 1 query, 1 repeat")
    parser.add_argument("--sizes", type=int, nargs="*", default=[128, 512])
    parser.add_argument("--limit", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("bench/out/speculation-engine"))
    args = parser.parse_args(argv)
    needs_transformers(args.engine, "speculation-engine", TRANSFORMERS_ONLY)
    if args.smoke:
        args.sizes, args.limit, args.repeats = [16], 1, 1
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    git = git_state()  # at start: what ran, even if commits land meanwhile

    engine = engine_from_args(args, num_threads=args.threads)
    rows: list[dict[str, Any]] = []
    for size in args.sizes:
        suite = generate_suite("scale-up", num_leaves=size, seed=0)
        tree = build_tree(suite.catalog)
        for q in [q for q in suite.queries if q["gold"]][:args.limit]:  # in scope only
            found = model_route(engine, tree, q["query"], q["gold"][0].split("/")[0])
            if found is None:
                log.info("scale-up-%d %s: the model did not go straight down", size, q["id"])
                continue
            row = {"catalog": f"scale-up-{size}", "query": q["id"],
                   **time_both(engine, *found, args.repeats)}
            log.info("%s", row)
            rows.append(row)
    overall = {"routes": len(rows),
               "ratio_median": statistics.median(r["ratio"] for r in rows) if rows else None,
               "identical": all(r["identical"] for r in rows)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(
        {"benchmark": "speculation_engine_bench",
         "environment": engine_environment(engine, git=git), "repeats": args.repeats,
         "rows": rows, "overall": overall}, indent=2) + "\n")
    print(f"{'catalog':<15}{'query':<7}{'levels':>7}{'tokens':>8}{'1 pass ms':>11}"
          f"{'steps ms':>10}{'ratio':>7}{'same':>6}")
    for r in rows:
        print(f"{r['catalog']:<15}{r['query']:<7}{r['levels']:>7}{r['tokens']:>8}"
              f"{r['one_pass_ms_p50']:>11.0f}{r['step_by_step_ms_p50']:>10.0f}"
              f"{r['ratio']:>7.2f}{r['identical']!s:>6}")
    print(f"overall: {overall}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
