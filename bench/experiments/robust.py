"""Routing that can change its mind, measured: flat vs the paper's hierarchy vs the hierarchy
with each recovery mechanism added in turn, on the semantic-overlap suite and Seal-Tools dev.

    stackroute bench robust [--sizes 16 32 64] [--limit 12]
        [--seal-single 8] [--seal-multi 4] [--out bench/out/robust] [--smoke]

Rows (cumulative from `hierarchical`; settings from the model's calibration file):
flat | hierarchical | +evidence | +calibrated | +backtracking | +beam | +fallback, plus
`embeddings-alone` (each request goes straight to its best-scoring leaf; no model).
Queries: the first `--limit` of each generated suite (seed 0; calibration used seed 1), and
the first `--seal-single` single-tool and `--seal-multi` multi-tool Seal-Tools dev queries
(calibration skipped those). Success = the run's calls equal the gold paths, in order.
Arguments are generated (schema-constrained) but capped at `--max-argument-tokens`: a tiny
model can fill a free-text field without end, and the cut-off answer is a misstep retried
in every row alike.

Queries run one at a time through every variant (query-major), so each query's long root
prompt is prefilled once: before the variants, an untimed warm-up call prefills the
hierarchical root prompt, and every hierarchical row is then timed with that prefix cached
(`root_warmup_ms_p50` says what it cost). Flat rows are timed cold. Tokens and calls do not
depend on the cache. Writes `results.json` and `queries.jsonl` under `--out`.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from stackroute.bench.engines import add_engine_options, engine_from_args
from stackroute.bench.environment import engine_environment, git_state
from stackroute.bench.workloads.datasets import Dataset, generated_dataset, seal_dataset
from stackroute.runtime.errors import InputError
from stackroute.runtime.machine import StackMachine
from stackroute.runtime.state import RunState
from stackroute.runtime.tree import CapabilityTree
from stackroute.server.embeddings.leaf_index import EvidenceSource
from stackroute.server.routing.calibration import load_recovery_options
from stackroute.server.routing.options import DraftSource, RouterOptions
from stackroute.server.routing.recovery import RecoveryOptions
from stackroute.server.routing.router import build_machine, evidence_for_tree
from stackroute.server.tools.evaluate import EvalSummary, Query, QueryResult, run_query, score

log = logging.getLogger(__name__)

REPORT_SEED = 0


@dataclass(frozen=True)
class Variant:
    name: str
    is_flat: bool = False
    recovery: RecoveryOptions | None = None


def variants(calibrated: RecoveryOptions, *, beam_width: int) -> list[Variant]:
    """flat, the paper's hierarchy, then one mechanism more per row."""
    evidence = replace(
        RecoveryOptions.off(), evidence_weight=calibrated.evidence_weight,
        evidence_aggregate=calibrated.evidence_aggregate,
        evidence_temperature=calibrated.evidence_temperature,
        out_of_scope_score=calibrated.out_of_scope_score, done_gap=calibrated.done_gap,
        back_gap=calibrated.back_gap, max_bias=calibrated.max_bias)
    contrast = replace(evidence, is_contrast_enabled=True,
                       contrast_strength=calibrated.contrast_strength)
    backtracking = replace(contrast, is_backtracking_enabled=True,
                           min_confidence=calibrated.min_confidence,
                           backtrack_gap=calibrated.backtrack_gap)
    beam = replace(backtracking, beam_width=max(2, beam_width),
                   beam_margin=calibrated.beam_margin)
    fallback = replace(beam, is_fallback_enabled=True,
                       fallback_min_score=calibrated.fallback_min_score)
    return [Variant("flat", is_flat=True), Variant("hierarchical"),
            Variant("+evidence", recovery=evidence), Variant("+calibrated", recovery=contrast),
            Variant("+backtracking", recovery=backtracking), Variant("+beam", recovery=beam),
            Variant("+fallback", recovery=fallback)]


def datasets(sizes: Sequence[int], *, limit: int, seal_single: int,
             seal_multi: int) -> list[Dataset]:
    out = [generated_dataset("semantic-overlap", size, seed=REPORT_SEED, limit=limit)
           for size in sizes]
    if seal_single or seal_multi:
        out.append(seal_dataset(single=seal_single, multi=seal_multi))
    return out


@dataclass
class Outcome:
    result: QueryResult
    wall_ms: float
    fired: dict[str, int]


def run_one(machine: StackMachine, tree: CapabilityTree, query: Query) -> Outcome:
    started = time.perf_counter()
    try:
        state = run_query(machine, query)
        result = score(tree, query, state)
        fired = mechanisms_fired(state)
    except InputError as e:  # e.g. the flat menu overflows the model's context
        result = QueryResult(id=query.id, tags=query.tags, gold=query.gold, called=(),
                             is_success=False, is_args_success=False, outcome="error",
                             usage={}, format_failures=0, error=str(e))
        fired = {}
    return Outcome(result, (time.perf_counter() - started) * 1e3, fired)


def mechanisms_fired(state: RunState) -> dict[str, int]:
    counts = {"backtrack": 0, "back_veto": 0, "beam": 0, "fallback": 0, "model_back": 0}
    for event in state.trace:
        if event.kind.value != "route":
            continue
        for key in ("backtrack", "back_veto", "beam", "fallback"):
            counts[key] += key in event.detail
        counts["model_back"] += event.decision == "BACK" and "backtrack" not in event.detail
    return counts


def embeddings_alone(evidence: EvidenceSource, query: Query, threshold: float) -> bool:
    best, value = evidence.for_request(query.query).best()
    called = (best,) if value >= threshold else ()
    return called == query.gold


def warm_root(machine: StackMachine, query: Query) -> float:
    """Prefill the hierarchical root prompt of `query` (untimed for the rows); its cost."""
    state = machine.start(query.query)
    prompt = machine.layout.routing_prompt(state)
    menu = machine.menu_for(state, state.top())
    engine = getattr(machine.router, "engine", None)
    if engine is None:
        return 0.0
    started = time.perf_counter()
    engine.choose(prompt, menu.options)
    return (time.perf_counter() - started) * 1e3


def summarize(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    summary = EvalSummary(results=[o.result for o in outcomes]).to_dict()
    summary["wall_ms_p50"] = statistics.median(o.wall_ms for o in outcomes) if outcomes else 0
    summary["errors"] = sum(o.result.outcome == "error" for o in outcomes)
    summary["fired"] = {k: sum(o.fired.get(k, 0) for o in outcomes)
                        for k in ("backtrack", "back_veto", "beam", "fallback", "model_back")}
    return summary


def run_dataset(engine: Any, embedder: Any, data: Dataset, rows: Sequence[Variant],
                out_queries: Any, *, out_of_scope_score: float,
                max_argument_tokens: int) -> dict[str, Any]:
    evidence = evidence_for_tree(data.tree, embedder)
    machines = {v.name: build_machine(data.tree, engine, is_flat=v.is_flat,
                                      options=RouterOptions(
                                          recovery=v.recovery, speculation=DraftSource.OFF,
                                          max_argument_tokens=max_argument_tokens),
                                      evidence=None if v.is_flat else evidence,
                                      style=data.style) for v in rows}
    hierarchical = machines["hierarchical"]
    outcomes: dict[str, list[Outcome]] = {v.name: [] for v in rows}
    warmups: list[float] = []
    alone: list[bool] = []
    for n, query in enumerate(data.queries, 1):
        warmups.append(warm_root(hierarchical, query))
        alone.append(embeddings_alone(evidence, query, out_of_scope_score))
        for v in rows:
            outcome = run_one(machines[v.name], data.tree, query)
            outcomes[v.name].append(outcome)
            out_queries.write(json.dumps({"dataset": data.name, "variant": v.name,
                                          **outcome.result.to_dict(),
                                          "wall_ms": round(outcome.wall_ms, 1),
                                          "fired": outcome.fired}) + "\n")
            out_queries.flush()
        log.info("%s %d/%d: %s", data.name, n, len(data.queries),
                 " ".join(f"{v.name}={int(outcomes[v.name][-1].result.is_success)}"
                          for v in rows))
    summaries = {name: summarize(o) for name, o in outcomes.items()}
    flat_tokens = summaries["flat"]["prompt_tokens_mean"] if "flat" in summaries else 0
    for s in summaries.values():
        s["prompt_tokens_vs_flat"] = round(s["prompt_tokens_mean"] / flat_tokens, 4) \
            if flat_tokens else None
    flat_needed = flat_prompt_tokens(machines.get("flat"), engine, data.queries)
    return {"num_queries": len(data.queries), "variants": summaries,
            "embeddings_alone_success": sum(alone) / max(len(alone), 1),
            "root_warmup_ms_p50": statistics.median(warmups) if warmups else 0.0,
            "flat_prompt_tokens_needed_mean": flat_needed,
            "options": {v.name: None if v.recovery is None else v.recovery.to_dict()
                        for v in rows}}


def flat_prompt_tokens(machine: StackMachine | None, engine: Any,
                       queries: Sequence[Query]) -> float | None:
    """Tokens of each query's first flat prompt, counted even where it overflows the
    context (so the token ratio is defined when flat cannot run)."""
    if machine is None or not queries:
        return None
    counts = []
    for q in queries:
        state = machine.start(q.query)
        counts.append(engine.count_tokens(machine.layout.routing_prompt(state)))
    return float(statistics.mean(counts))


def goal_check(results: dict[str, Any]) -> list[str]:
    """The issue's goal on the overlap suite: the full-recovery row reaches flat's success
    at <= 20% of flat's prompt tokens."""
    lines = []
    for name, r in results.items():
        if not name.startswith("semantic-overlap"):
            continue
        v = r["variants"]
        flat, full = v["flat"], v["+fallback"]
        needed = r["flat_prompt_tokens_needed_mean"] or flat["prompt_tokens_mean"]
        ratio = full["prompt_tokens_mean"] / needed if needed else float("nan")
        verdict = "meets" if full["success"] >= flat["success"] and ratio <= 0.2 else "misses"
        lines.append(f"{name}: recovery {full['success']:.3f} vs flat {flat['success']:.3f} "
                     f"success; tokens {ratio:.1%} of flat's prompt "
                     f"({full['prompt_tokens_mean']:.0f} vs {needed:.0f}): {verdict}")
    return lines


def print_table(results: dict[str, Any]) -> None:
    header = (f"{'variant':<15}{'success':>8}{'prompt tok':>12}{'x flat':>8}{'calls':>7}"
              f"{'wall p50 ms':>13}{'fired b/beam/fb':>17}")
    for name, r in results.items():
        print(f"\n{name} ({r['num_queries']} queries; embeddings alone: "
              f"{r['embeddings_alone_success']:.3f}; root warm-up p50 "
              f"{r['root_warmup_ms_p50']:.0f} ms)")
        print(header)
        for variant, s in r["variants"].items():
            ratio = s["prompt_tokens_vs_flat"]
            fired = s["fired"]
            print(f"{variant:<15}{s['success']:>8.3f}{s['prompt_tokens_mean']:>12.0f}"
                  f"{'' if ratio is None else f'{ratio:.3f}':>8}{s['model_calls_mean']:>7.2f}"
                  f"{s['wall_ms_p50']:>13.0f}"
                  f"{fired['backtrack']:>7}/{fired['beam']}/{fired['fallback']:<5}"
                  + (f"  errors={s['errors']}" if s["errors"] else ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_engine_options(parser)
    parser.add_argument("--sizes", type=int, nargs="*", default=[16, 32, 64])
    parser.add_argument("--limit", type=int, default=12, help="queries per generated suite")
    parser.add_argument("--seal-single", type=int, default=8)
    parser.add_argument("--seal-multi", type=int, default=4)
    parser.add_argument("--beam", type=int, default=2, help="beam width of the +beam row")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--max-argument-tokens", type=int, default=128,
                        help="cap on a leaf's generated arguments (every row alike)")
    parser.add_argument("--out", type=Path, default=Path("bench/out/robust"))
    parser.add_argument("--smoke", action="store_true", help="16 leaves, 1 query, no Seal-Tools")
    args = parser.parse_args(argv)
    git = git_state()  # at start: what ran, even if commits land meanwhile
    if args.smoke:
        args.sizes, args.limit, args.seal_single, args.seal_multi = [16], 1, 0, 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")

    from stackroute.server.embeddings.embedder import Embedder

    engine = engine_from_args(args, num_threads=args.threads)
    embedder = Embedder()
    calibrated = load_recovery_options(engine.info.model)
    rows = variants(calibrated, beam_width=args.beam)
    sets = datasets(args.sizes, limit=args.limit, seal_single=args.seal_single,
                    seal_multi=args.seal_multi)
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    started = time.perf_counter()
    with open(args.out / "queries.jsonl", "w", encoding="utf-8") as out_queries:
        for data in sets:
            results[data.name] = run_dataset(
                engine, embedder, data, rows, out_queries,
                out_of_scope_score=calibrated.out_of_scope_score,
                max_argument_tokens=args.max_argument_tokens)
    goal = goal_check(results)
    body = {"benchmark": "robust_bench", "environment": engine_environment(engine, git=git),
            "max_argument_tokens": args.max_argument_tokens,
            "calibration": calibrated.to_dict(), "seed": REPORT_SEED,
            "queries": {d.name: [q.id for q in d.queries] for d in sets},
            "elapsed_s": round(time.perf_counter() - started, 1), "results": results,
            "goal": goal}
    (args.out / "results.json").write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
    print_table(results)
    print()
    for line in goal:
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
