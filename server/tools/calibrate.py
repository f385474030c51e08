"""Calibrate the guided policy for one model on dev queries (`stackroute calibrate`).

Two kinds of setting, measured separately:
- **weights** (evidence weight, aggregate and temperature, contrast strength) depend on the
  model: its menu log-probs are collected once (`calibration_records.py`) and every setting of
  the grid is scored offline; the best mean path accuracy over the datasets wins, ties to the
  weaker prior.
- **thresholds** (out of scope, fallback, backtracking gap, done gap, finish) need no model:
  they come from the evidence scores of the dev queries alone. Single-tool and out-of-scope
  queries set the out-of-scope score and the backtracking gap; every in-scope query sets the
  done gap (stop after the last gold call, go on before it); multi-tool queries set the
  finish score.

Works on any catalog and query file of ../shared/data/FORMAT.md; calibrate on dev splits only,
and report on test splits.
"""

from __future__ import annotations

import itertools
import json
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from stackroute.server.embeddings.leaf_index import Aggregate, EvidenceSource
from stackroute.server.engines.base import Engine
from stackroute.server.routing.calibration import read_calibration, write_calibration
from stackroute.server.routing.finish import request_parts
from stackroute.server.routing.recovery import RecoveryOptions
from stackroute.server.tools.calibration_records import (
    Dataset,
    MenuRecord,
    accuracy_by_dataset,
    collect,
    confidence_auroc,
    decisions_right,
    evidence_right,
    path_accuracy,
)

WEIGHTS = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0)
AGGREGATES = ((Aggregate.MAX, 0.05), (Aggregate.SOFTMAX, 0.02), (Aggregate.SOFTMAX, 0.05))
STRENGTHS = (0.0, 0.5, 1.0)
MAX_GOLD_BACKTRACKED = 0.05  # the backtracking gap may send at most this share of gold frames BACK


@dataclass(frozen=True)
class Calibration:
    """What `calibrate` measured: the options routers load, and the numbers behind them."""

    model: str
    options: RecoveryOptions
    measured: dict[str, Any]
    records: list[MenuRecord] = field(default_factory=list, repr=False)

    def write(self, path: Path) -> None:
        write_calibration(path, model=self.model, options=self.options, measured=self.measured)


def calibrate(engine: Engine, evidence: Mapping[str, EvidenceSource],
              datasets: Sequence[Dataset], *, threshold_sets: Sequence[Dataset] | None = None,
              on_query: Callable[[], None] | None = None) -> Calibration:
    """Weights from the model's log-probs on `datasets`, thresholds from the evidence on
    `threshold_sets` (default: the same). `evidence` maps each dataset's name to its
    catalog's evidence."""
    thresholds = measure_thresholds(threshold_sets or datasets, evidence)
    base = with_thresholds(RecoveryOptions(), thresholds)
    records: list[MenuRecord] = []
    started = time.perf_counter()
    for dev in datasets:
        records += collect(engine, evidence[dev.name], dev, on_query=on_query)
    collect_s = time.perf_counter() - started
    rows = sweep(records, base=base)
    best = chosen_row(rows)
    model_alone = _row(rows, weight=0.0, strength=0.0)
    model_contrast = _row(rows, weight=0.0, strength=1.0)
    measured = {
        "dev": {dev.name: len(dev.queries) for dev in datasets},
        "num_menus": len(records),
        "collect_s": round(collect_s, 1),
        "model_alone": model_alone["by_dataset"],
        "model_calibrated": model_contrast["by_dataset"],
        "evidence_alone": accuracy_by_dataset(records, evidence_right),
        "chosen": best,
        "confidence_auroc": confidence_auroc(records),
        "thresholds": thresholds,
        "sweep": sorted(rows, key=lambda r: -r["path_accuracy_mean"])[:12],
    }
    return Calibration(engine.info.model, setting_options(base, best), measured, records)


def calibrate_thresholds(model: str, evidence: Mapping[str, EvidenceSource],
                         datasets: Sequence[Dataset], *, keep: Path | None) -> Calibration:
    """Only the model-free thresholds, for the current evidence, keeping the weights (and the
    measurements) of the calibration file `keep` (None: the built-in defaults): what a change
    to the evidence, not to the model, needs. Minutes, not the model's hour."""
    base = RecoveryOptions() if keep is None else read_calibration(keep)
    previous = {} if keep is None else json.loads(keep.read_text(encoding="utf-8"))
    thresholds = measure_thresholds(datasets, evidence)
    measured = {**previous.get("measured", {}), "thresholds": thresholds,
                "thresholds_dev": {d.name: len(d.queries) for d in datasets}}
    return Calibration(model, with_thresholds(base, thresholds), measured)


# -- weights ------------------------------------------------------------------------------------
def sweep(records: Sequence[MenuRecord], *, base: RecoveryOptions | None = None,
          ) -> list[dict[str, Any]]:
    """Every grid setting on top of `base`, scored per dataset; the mean over datasets ranks
    them."""
    base = base or RecoveryOptions()
    datasets = sorted({r.dataset for r in records})
    rows = []
    for weight, (aggregate, temperature), strength in itertools.product(
            WEIGHTS, AGGREGATES, STRENGTHS):
        if weight == 0 and (aggregate, temperature) != AGGREGATES[0]:
            continue  # no prior: the aggregate does not matter
        row = {"evidence_weight": weight, "evidence_aggregate": aggregate.value,
               "evidence_temperature": temperature, "contrast_strength": strength}
        options = setting_options(base, row)
        per = {}
        for name in datasets:
            subset = [r for r in records if r.dataset == name]
            right = decisions_right(subset, options)
            per[name] = {"decision_accuracy": round(sum(right) / len(right), 4),
                         "path_accuracy": round(path_accuracy(subset, right), 4)}
        rows.append({**row, "by_dataset": per, "path_accuracy_mean": round(statistics.mean(
            v["path_accuracy"] for v in per.values()), 4) if per else 0.0})
    return rows


def chosen_row(rows: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The sweep row routers get: the best mean path accuracy; among rows that tie, one
    without contrast (it asks the model a content-free question on every new menu, a model
    call a request that bought no accuracy here), then the weakest prior (the model keeps
    the most say)."""
    return max(rows, key=lambda r: (r["path_accuracy_mean"], r["contrast_strength"] == 0,
                                    -r["evidence_weight"]))


def setting_options(base: RecoveryOptions, row: Mapping[str, Any]) -> RecoveryOptions:
    """`base` with the weights of one sweep row."""
    strength = float(row["contrast_strength"])
    return replace(base, evidence_weight=float(row["evidence_weight"]),
                   evidence_aggregate=Aggregate(row["evidence_aggregate"]),
                   evidence_temperature=float(row["evidence_temperature"]),
                   is_contrast_enabled=strength > 0, contrast_strength=strength or 1.0)


def _row(rows: Sequence[dict[str, Any]], *, weight: float, strength: float) -> dict[str, Any]:
    return next(r for r in rows
                if r["evidence_weight"] == weight and r["contrast_strength"] == strength)


# -- thresholds ---------------------------------------------------------------------------------
def measure_thresholds(datasets: Sequence[Dataset], evidence: Mapping[str, EvidenceSource],
                       ) -> dict[str, Any]:
    """Out of scope, backtracking, stop (done gap) and finish thresholds; evidence only."""
    thresholds = score_thresholds(datasets, evidence)
    thresholds["stop"] = done_gap_threshold(datasets, evidence,
                                            thresholds["out_of_scope_score"])
    thresholds["finish"] = finish_threshold(datasets, evidence)
    return thresholds


def with_thresholds(base: RecoveryOptions, thresholds: Mapping[str, Any]) -> RecoveryOptions:
    """`base` with the measured thresholds (a missing stop or finish keeps `base`'s)."""
    return replace(
        base, out_of_scope_score=thresholds["out_of_scope_score"],
        fallback_min_score=thresholds["out_of_scope_score"],
        backtrack_gap=thresholds["backtrack_gap"],
        done_gap=thresholds.get("stop", {}).get("done_gap", base.done_gap),
        finish_part_score=thresholds.get("finish", {}).get("finish_part_score",
                                                           base.finish_part_score))


def score_thresholds(datasets: Sequence[Dataset], evidence: Mapping[str, EvidenceSource],
                     ) -> dict[str, Any]:
    """Out-of-scope and backtracking thresholds from the best-leaf scores of single-tool and
    out-of-scope queries."""
    in_scope: list[float] = []
    out_scope: list[float] = []
    inside_gold: list[float] = []  # best elsewhere minus best inside, on gold-path frames
    inside_wrong: list[float] = []  # the same in sibling (wrong) frames
    for dev in datasets:
        for q in dev.queries:
            if len(q.gold) > 1:
                continue  # multi-tool: the done and finish thresholds' data
            ev = evidence[dev.name].for_request(q.query)
            (in_scope if q.gold else out_scope).append(ev.best()[1])
            path = tuple(q.gold[0].split("/")) if q.gold else ()
            for depth in range(1, len(path)):
                node = dev.tree.node(path[:depth])
                parent = dev.tree.node(path[:depth - 1])
                inside_gold.append(ev.outside_score(node.path_str) - ev.node_score(node.path_str))
                for sibling in parent.children:
                    if sibling.name != node.name and not sibling.is_leaf:
                        inside_wrong.append(ev.outside_score(sibling.path_str)
                                            - ev.node_score(sibling.path_str))
    gap = backtrack_gap(inside_gold)
    return {
        "out_of_scope_score": separating_threshold(in_scope, out_scope),
        "backtrack_gap": gap,
        "num_in_scope": len(in_scope), "num_out_of_scope": len(out_scope),
        "in_scope_best_p10": quantile(in_scope, 0.1),
        "out_of_scope_best_max": max(out_scope, default=None),
        "gold_frames_backtracked": _share_above(inside_gold, gap),
        "wrong_frames_backtracked": _share_above(inside_wrong, gap),
    }


def done_gap_threshold(datasets: Sequence[Dataset], evidence: Mapping[str, EvidenceSource],
                       out_of_scope: float) -> dict[str, Any]:
    """The `done_gap` that best tells, after each gold call, whether to stop or go on: the
    prior makes DONE win when no remaining leaf scores above `best called - done_gap` (and
    above `out_of_scope`). Every in-scope query; multi-tool ones give the go-on cases."""
    cases: list[tuple[float, bool]] = []  # (best called - best remaining, should stop)
    for dev in datasets:
        for q in dev.queries:
            gold = list(dict.fromkeys(q.gold))
            if not gold:
                continue
            ev = evidence[dev.name].for_request(q.query)
            report = ev.index.report_paths
            for k in range(1, len(gold) + 1):
                called = set(gold[:k])
                best_called = max(float(ev.scores[i]) for i, p in enumerate(report)
                                  if p in called)
                remaining = ev.without(called).best()[1]
                if remaining < out_of_scope:
                    continue  # DONE wins whatever the gap
                cases.append((best_called - remaining, k == len(gold)))
    if not cases:
        return {"num_cases": 0}  # nothing to tell: the done gap stays as it was
    gap, num_right = best_done_gap(cases)
    return {"done_gap": gap, "num_cases": len(cases),
            "stop_cases": sum(stop for _, stop in cases),
            "accuracy": round(num_right / max(len(cases), 1), 4)}


def finish_threshold(datasets: Sequence[Dataset], evidence: Mapping[str, EvidenceSource],
                     ) -> dict[str, Any]:
    """`finish_part_score`: the lowest decile of the best-leaf scores of the parts of
    multi-tool requests that ask for a gold leaf, so that nine in ten real asks count and
    most distractors do not. Without multi-tool queries, none (the score stays as it was)."""
    asks: list[float] = []
    others: list[float] = []
    for dev in datasets:
        for q in dev.queries:
            if len(q.gold) < 2:
                continue
            for part in request_parts(q.query):
                leaf, score = evidence[dev.name].for_request(part).best()
                (asks if leaf in q.gold else others).append(score)
    if not asks:
        return {"num_asks": 0}
    threshold = round(quantile(asks, 0.1), 3)
    return {"finish_part_score": threshold, "num_asks": len(asks), "num_others": len(others),
            "others_above": round(sum(s >= threshold for s in others) / max(len(others), 1),
                                  4)}


def separating_threshold(positive: Sequence[float], negative: Sequence[float]) -> float:
    """The score that best separates in-scope (above) from out-of-scope (below) requests,
    in the middle of the gap; without out-of-scope examples, just under the 5th percentile
    of in-scope ones.

    >>> separating_threshold([0.5, 0.6, 0.7], [0.1, 0.2])
    0.35
    """
    if not negative:
        return round(quantile(positive, 0.05) - 0.01, 3)
    best, best_right = 0.0, -1
    for t in sorted(set(positive) | set(negative)):
        right = sum(p >= t for p in positive) + sum(n < t for n in negative)
        if right > best_right:
            best, best_right = t, right
    below = [v for v in (*positive, *negative) if v < best]
    return round((best + max(below)) / 2 if below else best, 3)  # the middle of the gap


def backtrack_gap(gold_gaps: Sequence[float]) -> float:
    """The smallest gap that sends at most `MAX_GOLD_BACKTRACKED` of gold-path frames BACK
    (`gold_gaps`: best leaf elsewhere minus best inside, per gold frame); 0.15 without any."""
    if not gold_gaps:
        return 0.15
    gaps = sorted(gold_gaps)
    gap = gaps[min(len(gaps) - 1, math.ceil((1 - MAX_GOLD_BACKTRACKED) * len(gaps)))]
    return max(0.0, round(gap, 3))


def best_done_gap(cases: Sequence[tuple[float, bool]]) -> tuple[float, int]:
    """The gap in 0.00..0.40 that gets most `(lead, should stop)` cases right (stop when the
    best called leaf leads the best remaining one by more than the gap), and how many; ties
    to the smallest gap.

    >>> best_done_gap([(0.3, True), (0.05, False), (0.12, True)])
    (0.05, 3)
    """
    best_gap, best_right = 0.0, -1
    for gap in [round(0.01 * i, 2) for i in range(0, 41)]:
        right = sum((lead > gap) == stop for lead, stop in cases)
        if right > best_right:
            best_gap, best_right = gap, right
    return best_gap, best_right


def quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else math.nan


def _share_above(values: Sequence[float], threshold: float) -> float:
    return round(sum(v > threshold for v in values) / max(len(values), 1), 4)
