"""Calibrate the recovery settings of one model on dev splits, and record them.

    python -m stackroute.bench.calibrate [--model PATH] [--sizes 16 32 64] [--seal-single 40]

Dev data only: the semantic-overlap suite generated with seed 1 (the benchmark reports seed 0)
and the first queries of Seal-Tools `dev.queries.jsonl`. For every query it takes the menus
on the gold path (teacher forcing: each level's fresh frame, as the runtime would build it)
and asks the model once per menu without any bias, plus once per distinct menu for the
neutral prompt. Because the prior and the contrast are additive in log space, every setting
of (weight, aggregate, temperature, contrast strength) is then scored offline from those
numbers: a decision is right when `argmax(log p + bias)` is the gold option. Thresholds that
need no model (out of scope, fallback, backtracking gap) come from the embedding scores alone.

Writes `server/routing/calibrations/<model>.json` (package data, what routers load) and,
with `--records`, every
decision as JSONL.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import math
import statistics
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from stackroute.bench.datasets import (
    SEAL_DIR,
    Dataset,
    generated_dataset,
    seal_dataset,
    seal_queries,
)
from stackroute.runtime.machine import StackMachine
from stackroute.runtime.menu import CompletionState, Menu
from stackroute.runtime.prompt import PromptLayout
from stackroute.runtime.router import RoutingRequest, ScriptedRouter
from stackroute.runtime.tree import Node
from stackroute.server.embeddings.leaf_index import Aggregate, Evidence, EvidenceSource
from stackroute.server.engines.base import Engine
from stackroute.server.routing.calibration import calibration_file, write_calibration
from stackroute.server.routing.contrast import NeutralContrast
from stackroute.server.routing.finish import request_parts
from stackroute.server.routing.prior import menu_prior
from stackroute.server.routing.recovery import RecoveryOptions
from stackroute.server.routing.router import evidence_for_tree
from stackroute.server.tools.evaluate import Query

log = logging.getLogger(__name__)

DEV_SEED = 1
WEIGHTS = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0)
AGGREGATES = ((Aggregate.MAX, 0.05), (Aggregate.SOFTMAX, 0.02), (Aggregate.SOFTMAX, 0.05))
STRENGTHS = (0.0, 0.5, 1.0)


@dataclass
class MenuRecord:
    """One gold-path menu: the model's raw and neutral log-probs and the request's evidence."""

    dataset: str
    query_id: str
    node: Node
    menu: Menu
    gold: str
    raw: dict[str, float]
    neutral: dict[str, float]
    evidence: Evidence

    def to_dict(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "query_id": self.query_id, "node": self.node.path_str,
                "options": list(self.menu.options), "gold": self.gold,
                "raw": {o: round(v, 5) for o, v in self.raw.items()},
                "neutral": {o: round(v, 5) for o, v in self.neutral.items()},
                "evidence_top": [[p, round(s, 4)] for p, s in self.evidence.top(3)]}


def dev_sets(sizes: Sequence[int], *, seal_single: int, seal_multi: int,
             max_queries: int, seal_offset: int = 0) -> list[Dataset]:
    sets = [generated_dataset("semantic-overlap", size, seed=DEV_SEED, limit=max_queries)
            for size in sizes]
    if seal_single or seal_multi:
        sets.append(seal_dataset(single=seal_single, multi=seal_multi, offset=seal_offset))
    return sets


def gold_menus(machine: StackMachine, query: Query) -> Iterator[tuple[RoutingRequest, str]]:
    """Each fresh frame on the path to the first gold leaf (or the root for an out-of-scope
    request, whose gold answer is DONE), as the request the runtime would make."""
    path = query.gold[0].split("/") if query.gold else []
    stops = range(len(path)) if path else range(1)
    for depth in stops:
        state = machine.start(query.query, at="/".join(path[:depth]))
        frame = state.top()
        node = machine.tree.node(frame.node_path)
        request = RoutingRequest(run_id="calibrate", step=0, depth=len(state.stack) - 1,
                                 task=query.query, node=node,
                                 menu=machine.menu_for(state, frame),
                                 prompt=machine.layout.routing_prompt(state),
                                 layout=machine.layout)
        yield request, path[depth] if path else CompletionState.DONE.value


def collect(engine: Engine, evidence: EvidenceSource, dev: Dataset) -> list[MenuRecord]:
    machine = StackMachine(dev.tree, ScriptedRouter([]), layout=PromptLayout(dev.tree, dev.style))
    contrast = NeutralContrast(engine, strength=1.0)
    records = []
    for query in dev.queries:
        for request, gold in gold_menus(machine, query):
            result = engine.choose(request.prompt, request.menu.options)
            neutral_bias, _ = contrast.bias(request)
            records.append(MenuRecord(
                dataset=dev.name, query_id=query.id, node=request.node, menu=request.menu,
                gold=gold, raw={o: math.log(max(p, 1e-300))
                                for o, p in result.probabilities.items()},
                neutral={o: -b for o, b in neutral_bias.items()},
                evidence=evidence.for_request(query.query)))
    return records


def decisions_right(records: Sequence[MenuRecord], options: RecoveryOptions) -> list[bool]:
    """Whether `argmax(log p - strength * log p_neutral + prior bias)` is gold, per menu."""
    prior = options.prior
    out = []
    for r in records:
        bias = {o: 0.0 for o in r.menu.options}
        if options.evidence_weight > 0:
            bias = menu_prior(r.evidence, r.node, r.menu, calls=(), options=prior).bias
        strength = options.contrast_strength if options.is_contrast_enabled else 0.0
        score = {o: r.raw[o] - strength * r.neutral[o] + bias[o] for o in r.menu.options}
        out.append(max(score, key=lambda o: score[o]) == r.gold)
    return out


def evidence_right(records: Sequence[MenuRecord]) -> list[bool]:
    """Evidence alone (the child with the best leaf; DONE never)."""
    out = []
    for r in records:
        scores = {c: r.evidence.node_score(_child_path(r.node, c)) for c in r.menu.children}
        out.append(max(scores, key=lambda c: scores[c]) == r.gold if scores else False)
    return out


def path_accuracy(records: Sequence[MenuRecord], right: Sequence[bool]) -> float:
    """Share of queries whose every gold-path decision is right."""
    by_query: dict[tuple[str, str], bool] = {}
    for r, ok in zip(records, right, strict=True):
        key = (r.dataset, r.query_id)
        by_query[key] = by_query.get(key, True) and ok
    return sum(by_query.values()) / max(len(by_query), 1)


def sweep(records: Sequence[MenuRecord]) -> list[dict[str, Any]]:
    """Every grid setting, scored per dataset; the mean over datasets ranks them."""
    datasets = sorted({r.dataset for r in records})
    rows = []
    for weight, (aggregate, temperature), strength in itertools.product(
            WEIGHTS, AGGREGATES, STRENGTHS):
        if weight == 0 and (aggregate, temperature) != AGGREGATES[0]:
            continue  # no prior: the aggregate does not matter
        options = RecoveryOptions(evidence_weight=weight, evidence_aggregate=aggregate,
                                  evidence_temperature=temperature,
                                  is_contrast_enabled=strength > 0,
                                  contrast_strength=strength or 1.0)
        per = {}
        for name in datasets:
            subset = [r for r in records if r.dataset == name]
            right = decisions_right(subset, options)
            per[name] = {"decision_accuracy": round(sum(right) / len(right), 4),
                         "path_accuracy": round(path_accuracy(subset, right), 4)}
        rows.append({"evidence_weight": weight, "evidence_aggregate": aggregate.value,
                     "evidence_temperature": temperature, "contrast_strength": strength,
                     "by_dataset": per,
                     "path_accuracy_mean": round(statistics.mean(
                         v["path_accuracy"] for v in per.values()), 4)})
    return rows


def score_thresholds(sets: Sequence[Dataset], evidence: dict[str, EvidenceSource],
                     ) -> dict[str, Any]:
    """Out-of-scope and backtracking thresholds from embedding scores alone."""
    in_scope: list[float] = []
    out_scope: list[float] = []
    inside_gold: list[float] = []  # best elsewhere minus best inside, on gold-path frames
    inside_wrong: list[float] = []  # the same in sibling (wrong) frames
    for dev in sets:
        for q in dev.queries:
            ev = evidence[dev.name].for_request(q.query)
            best = ev.best()[1]
            (in_scope if q.gold else out_scope).append(best)
            if not q.gold:
                continue
            path = tuple(q.gold[0].split("/"))
            for depth in range(1, len(path)):
                node = dev.tree.node(path[:depth])
                parent = dev.tree.node(path[:depth - 1])
                inside_gold.append(ev.outside_score(node.path_str) - ev.node_score(node.path_str))
                for sibling in parent.children:
                    if sibling.name != node.name and not sibling.is_leaf:
                        inside_wrong.append(ev.outside_score(sibling.path_str)
                                            - ev.node_score(sibling.path_str))
    out_of_scope = _separating_threshold(in_scope, out_scope)
    gaps = sorted(inside_gold)
    # the smallest gap that backtracks out of at most 5% of gold frames
    gap = gaps[min(len(gaps) - 1, math.ceil(0.95 * len(gaps)))] if gaps else 0.15
    gap = max(0.0, round(gap, 3))
    return {
        "out_of_scope_score": out_of_scope,
        "backtrack_gap": gap,
        "num_in_scope": len(in_scope), "num_out_of_scope": len(out_scope),
        "in_scope_best_p10": _quantile(in_scope, 0.1),
        "out_of_scope_best_max": max(out_scope, default=None),
        "gold_frames_backtracked": round(sum(g > gap for g in inside_gold)
                                         / max(len(inside_gold), 1), 4),
        "wrong_frames_backtracked": round(sum(g > gap for g in inside_wrong)
                                          / max(len(inside_wrong), 1), 4),
    }


def done_gap_threshold(evidence: EvidenceSource, queries: Sequence[Query],
                       out_of_scope: float) -> dict[str, Any]:
    """The `done_gap` that best tells, after each gold call, whether to stop or go on: the
    prior makes DONE win when no remaining leaf scores above `best called - done_gap` (and
    above `out_of_scope`). Embeddings only; single- and multi-call dev queries."""
    cases: list[tuple[float, bool]] = []  # (best called - best remaining, should stop)
    for q in queries:
        gold = list(dict.fromkeys(q.gold))
        if not gold:
            continue
        ev = evidence.for_request(q.query)
        report = ev.index.report_paths
        for k in range(1, len(gold) + 1):
            called = set(gold[:k])
            best_called = max(float(ev.scores[i]) for i, p in enumerate(report) if p in called)
            remaining = ev.without(called).best()[1]
            if remaining < out_of_scope:
                continue  # DONE wins whatever the gap
            cases.append((best_called - remaining, k == len(gold)))
    best_gap, best_right = 0.15, -1
    for gap in [round(0.01 * i, 2) for i in range(0, 41)]:
        right = sum((lead > gap) == stop for lead, stop in cases)
        if right > best_right:
            best_gap, best_right = gap, right
    return {"done_gap": best_gap, "num_cases": len(cases),
            "stop_cases": sum(stop for _, stop in cases),
            "accuracy": round(best_right / max(len(cases), 1), 4)}


def finish_threshold(sets: Sequence[Dataset], evidence: dict[str, EvidenceSource],
                     ) -> dict[str, Any]:
    """`finish_part_score`: the lowest decile of the best-leaf scores of request parts that
    ask for a gold leaf (noisy-two-step dev: asks among distractor sentences), so that nine
    in ten real asks count and most distractors do not. Embeddings only."""
    asks: list[float] = []
    others: list[float] = []
    for dev in sets:
        for q in dev.queries:
            if len(q.gold) < 2:
                continue
            for part in request_parts(q.query):
                leaf, score = evidence[dev.name].for_request(part).best()
                (asks if leaf in q.gold else others).append(score)
    if not asks:
        return {"finish_part_score": RecoveryOptions().finish_part_score, "num_asks": 0}
    threshold = round(_quantile(asks, 0.1), 3)
    return {"finish_part_score": threshold, "num_asks": len(asks), "num_others": len(others),
            "others_above": round(sum(s >= threshold for s in others) / max(len(others), 1),
                                  4)}


def thresholds_only(model: str, out: Path | None, *, sizes: Sequence[int], max_queries: int,
                    seal_single: int, seal_offset: int, done_queries: int) -> int:
    """Recompute the model-free thresholds (out of scope, fallback, backtracking, done,
    finish) for the current evidence, keeping the model's calibrated weights: what a change to
    the evidence (not to the model) needs. Minutes, not the model's hour."""
    from stackroute.server.embeddings.embedder import shared_embedder
    from stackroute.server.routing.calibration import load_recovery_options

    embedder = shared_embedder()
    sets = dev_sets(sizes, seal_single=seal_single, seal_multi=0, max_queries=max_queries,
                    seal_offset=seal_offset)
    sets += [generated_dataset("noisy-two-step", 32, seed=DEV_SEED, limit=max_queries)]
    evidence = {dev.name: evidence_for_tree(dev.tree, embedder) for dev in sets}
    thresholds = score_thresholds([d for d in sets if not d.name.startswith("noisy")],
                                  evidence)
    seal = next((d for d in sets if d.name == "seal-tools-dev"), None)
    if seal is not None:
        stop_queries = seal_queries(SEAL_DIR / "dev.queries.jsonl", single=done_queries,
                                    multi=done_queries, offset=seal_offset)
        thresholds["stop"] = done_gap_threshold(evidence[seal.name], stop_queries,
                                                thresholds["out_of_scope_score"])
    thresholds["finish"] = finish_threshold(sets, evidence)
    path = out or calibration_file(model)
    previous = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    options = replace(
        load_recovery_options(model, directory=path.parent),
        out_of_scope_score=thresholds["out_of_scope_score"],
        fallback_min_score=thresholds["out_of_scope_score"],
        backtrack_gap=thresholds["backtrack_gap"],
        done_gap=thresholds.get("stop", {}).get("done_gap", RecoveryOptions().done_gap),
        finish_part_score=thresholds["finish"]["finish_part_score"])
    measured = {**previous.get("measured", {}), "thresholds": thresholds,
                "thresholds_dev": {d.name: len(d.queries) for d in sets}}
    write_calibration(path, model=model, options=options, measured=measured)
    print(json.dumps({"file": str(path), "options": options.to_dict(),
                      "thresholds": thresholds}, indent=1))
    return 0


def confidence_auroc(records: Sequence[MenuRecord]) -> float:
    """How well the model's own top probability tells right from wrong picks (0.5: not at
    all): the case for (or against) a confidence threshold for backtracking."""
    pairs = []
    for r in records:
        pick = max(r.raw, key=lambda o: r.raw[o])
        pairs.append((math.exp(r.raw[pick]), pick == r.gold))
    right = [p for p, ok in pairs if ok]
    wrong = [p for p, ok in pairs if not ok]
    if not right or not wrong:
        return math.nan
    wins = sum((a > b) + 0.5 * (a == b) for a in right for b in wrong)
    return round(wins / (len(right) * len(wrong)), 4)


def _separating_threshold(positive: Sequence[float], negative: Sequence[float]) -> float:
    """The score that best separates in-scope (above) from out-of-scope (below) requests,
    in the middle of the gap; without out-of-scope examples, just under the 5th percentile
    of in-scope ones."""
    if not negative:
        return round(_quantile(positive, 0.05) - 0.01, 3)
    best, best_right = 0.0, -1
    for t in sorted(set(positive) | set(negative)):
        right = sum(p >= t for p in positive) + sum(n < t for n in negative)
        if right > best_right:
            best, best_right = t, right
    below = [v for v in (*positive, *negative) if v < best]
    return round((best + max(below)) / 2 if below else best, 3)  # the middle of the gap


def _quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else math.nan


def _child_path(node: Node, child: str) -> str:
    return "/".join((*node.path, child))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="model folder or GGUF (default: embedded)")
    parser.add_argument("--sizes", type=int, nargs="*", default=[16, 32, 64])
    parser.add_argument("--max-queries", type=int, default=24, help="per generated suite")
    parser.add_argument("--seal-single", type=int, default=12)
    parser.add_argument("--seal-multi", type=int, default=0)
    parser.add_argument("--seal-offset", type=int, default=100,
                        help="skip this many of each kind (the benchmark uses the first ones)")
    parser.add_argument("--done-queries", type=int, default=100,
                        help="single- and multi-tool dev queries for done_gap (no model)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (1 is fastest on a shared 2-core machine)")
    parser.add_argument("--out", type=Path, default=None, help="calibration JSON path")
    parser.add_argument("--records", type=Path, default=None, help="write decisions as JSONL")
    parser.add_argument("--thresholds-only", action="store_true",
                        help="recompute the model-free thresholds for the current evidence "
                        "and keep the calibrated weights (no model calls)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    if args.thresholds_only:
        from stackroute.server.engines.model_store import DEFAULT_GGUF_FILENAME

        model = args.model or DEFAULT_GGUF_FILENAME.removesuffix(".gguf")
        return thresholds_only(model, args.out, sizes=args.sizes,
                               max_queries=args.max_queries, seal_single=args.seal_single,
                               seal_offset=args.seal_offset, done_queries=args.done_queries)

    from stackroute.server.embeddings.embedder import Embedder
    from stackroute.server.engines.transformers_engine import TransformersEngine

    engine = TransformersEngine(model=args.model, num_threads=args.threads)
    embedder = Embedder()
    sets = dev_sets(args.sizes, seal_single=args.seal_single, seal_multi=args.seal_multi,
                    max_queries=args.max_queries, seal_offset=args.seal_offset)
    evidence = {dev.name: evidence_for_tree(dev.tree, embedder) for dev in sets}
    records: list[MenuRecord] = []
    started = time.perf_counter()
    for dev in sets:
        log.info("collecting %s: %d queries", dev.name, len(dev.queries))
        records += collect(engine, evidence[dev.name], dev)
    collect_s = time.perf_counter() - started
    if args.records is not None:
        args.records.parent.mkdir(parents=True, exist_ok=True)
        args.records.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in records))
    rows = sweep(records)
    best = max(rows, key=lambda r: (r["path_accuracy_mean"], -r["evidence_weight"]))
    thresholds = score_thresholds(sets, evidence)
    seal = next((d for d in sets if d.name == "seal-tools-dev"), None)
    if seal is not None:  # stop-or-go needs multi-call requests: Seal-Tools dev, embeddings only
        stop_queries = seal_queries(SEAL_DIR / "dev.queries.jsonl", single=args.done_queries,
                                    multi=args.done_queries, offset=args.seal_offset)
        thresholds["stop"] = done_gap_threshold(evidence[seal.name], stop_queries,
                                                thresholds["out_of_scope_score"])
    model_alone = next(r for r in rows if r["evidence_weight"] == 0
                       and r["contrast_strength"] == 0)
    model_calibrated = next(r for r in rows if r["evidence_weight"] == 0
                            and r["contrast_strength"] == 1.0)
    options = replace(
        RecoveryOptions(),
        evidence_weight=best["evidence_weight"],
        evidence_aggregate=Aggregate(best["evidence_aggregate"]),
        evidence_temperature=best["evidence_temperature"],
        is_contrast_enabled=best["contrast_strength"] > 0,
        contrast_strength=best["contrast_strength"] or 1.0,
        out_of_scope_score=thresholds["out_of_scope_score"],
        fallback_min_score=thresholds["out_of_scope_score"],
        backtrack_gap=thresholds["backtrack_gap"],
        done_gap=thresholds.get("stop", {}).get("done_gap", RecoveryOptions().done_gap),
    )
    evidence_alone = {}
    for name in sorted({r.dataset for r in records}):
        subset = [r for r in records if r.dataset == name]
        right = evidence_right(subset)
        evidence_alone[name] = {"decision_accuracy": round(sum(right) / len(right), 4),
                                "path_accuracy": round(path_accuracy(subset, right), 4)}
    measured = {
        "dev": {dev.name: len(dev.queries) for dev in sets},
        "seal_offset": args.seal_offset,
        "dev_seed": DEV_SEED,
        "num_menus": len(records),
        "collect_s": round(collect_s, 1),
        "model_alone": model_alone["by_dataset"],
        "model_calibrated": model_calibrated["by_dataset"],
        "evidence_alone": evidence_alone,
        "chosen": best,
        "confidence_auroc": confidence_auroc(records),
        "thresholds": thresholds,
        "sweep": sorted(rows, key=lambda r: -r["path_accuracy_mean"])[:12],
    }
    out = args.out or calibration_file(engine.info.model)
    write_calibration(out, model=engine.info.model, options=options, measured=measured)
    print(json.dumps({"file": str(out), "options": options.to_dict(),
                      "model_alone": model_alone["by_dataset"], "chosen": best,
                      "evidence_alone": evidence_alone, "thresholds": thresholds,
                      "confidence_auroc": measured["confidence_auroc"]}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
