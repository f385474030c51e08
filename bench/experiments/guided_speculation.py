"""Guided routing with and without speculation, decision by decision, with the real model.

    stackroute bench guided-speculation [--suite semantic-overlap] [--size 32]
        [--limit 12] [--out bench/out/guided-speculation]

Three machines over one catalog, one engine: guided step by step, guided with evidence
drafts, guided with the route cache. Every query runs through all three, twice (the second
round asks each request again, so the route cache has a route to draft); the decisions
(every route, push, pop and leaf call) must be identical, and the table shows model calls
and forward passes per round. Writes `results.json` under `--out`.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path
from typing import Any

from stackroute.bench.engines import add_engine_options, engine_from_args
from stackroute.bench.environment import engine_environment, git_state
from stackroute.bench.workloads.datasets import generated_dataset
from stackroute.runtime.state import RunState
from stackroute.server.routing.calibration import router_options
from stackroute.server.routing.options import DraftSource, Policy
from stackroute.server.routing.router import build_machine, evidence_for_tree
from stackroute.server.tools.evaluate import run_query

log = logging.getLogger(__name__)
SOURCES = (DraftSource.OFF, DraftSource.EVIDENCE, DraftSource.ROUTES)


def decisions(state: RunState) -> list[tuple[str, str, str | None]]:
    return [(e.kind.value, e.path, e.decision) for e in state.trace
            if e.kind.value in ("route", "push", "pop_done", "pop_back", "leaf_result")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stackroute bench guided-speculation",
                                     description=__doc__.split("\n\n")[0])
    add_engine_options(parser)
    parser.add_argument("--smoke", action="store_true", help="overlap-16, 2 queries")
    parser.add_argument("--suite", default="semantic-overlap")
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--limit", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("bench/out/guided-speculation"))
    args = parser.parse_args(argv)
    if args.smoke:
        args.size, args.limit = 16, 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    from stackroute.server.embeddings.embedder import shared_embedder

    git = git_state()
    engine = engine_from_args(args)
    data = generated_dataset(args.suite, args.size, seed=args.seed, limit=args.limit)
    evidence = evidence_for_tree(data.tree, shared_embedder())
    machines = {s: build_machine(data.tree, engine, evidence=evidence, style=data.style,
                                 options=router_options(engine.info.model, policy=Policy.GUIDED,
                                                        speculation=s))
                for s in SOURCES}
    totals: dict[str, dict[str, dict[str, float]]] = {
        s.value: {r: {"model_calls": 0, "forward_passes": 0, "accepted_levels": 0}
                  for r in ("first", "repeat")} for s in SOURCES}
    mismatches: list[dict[str, Any]] = []
    started = time.time()
    for round_name in ("first", "repeat"):
        for query in data.queries:
            states = {s: run_query(machines[s], query) for s in SOURCES}
            reference = decisions(states[DraftSource.OFF])
            for s, state in states.items():
                for key in totals[s.value][round_name]:
                    totals[s.value][round_name][key] += getattr(state.usage, key)
                if decisions(state) != reference:
                    mismatches.append({"query": query.id, "round": round_name,
                                       "source": s.value})
            log.info("%s %s: identical=%s", round_name, query.id,
                     all(decisions(s) == reference for s in states.values()))
    results = {"environment": engine_environment(engine, git=git), "suite": data.name,
               "num_queries": len(data.queries), "totals": totals,
               "mismatches": mismatches, "seconds": round(time.time() - started, 1)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    print(f"{data.name}: {len(data.queries)} queries x 2 rounds, "
          f"{len(mismatches)} decision mismatches")
    for source, rounds in totals.items():
        for round_name, t in rounds.items():
            print(f"  {source:<9}{round_name:<7} model_calls {t['model_calls']:>5.0f}  "
                  f"forward_passes {t['forward_passes']:>6.0f}  "
                  f"accepted_levels {t['accepted_levels']:>4.0f}")
    return 1 if mismatches else 0


if __name__ == "__main__":
    raise SystemExit(main())
