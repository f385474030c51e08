"""The out-of-scope experiment's tables (`bench/experiments/out_of_scope.py`): rows summarised
per group, the probe's records labelled for the fit, and the fitted check replayed on them."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from stackroute.bench.workloads.out_of_scope import OUT_OF_SCOPE_TAG
from stackroute.server.routing.abstention import AbstentionFeatures, AbstentionOptions
from stackroute.server.tools.abstention_calibration import label
from stackroute.server.tools.abstention_fit import Label, Sample

ROWS = ("router", "router+abstain")
PROBE = "probe"


def summarize(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    oos = [r for r in records if OUT_OF_SCOPE_TAG in r["tags"]]
    ins = [r for r in records if OUT_OF_SCOPE_TAG not in r["tags"]]
    walls = sorted(r["wall_ms"] for r in records)
    calls = [r["model_calls"] for r in records]
    no_call = sum(not r["called"] for r in oos) / len(oos) if oos else None
    return {"num_out_of_scope": len(oos), "num_in_scope": len(ins),
            "out_of_scope_no_call": no_call,
            "tool_hallucination": None if no_call is None else 1 - no_call,
            "in_scope_success": sum(r["success"] for r in ins) / len(ins) if ins else None,
            "model_calls_mean": statistics.fmean(calls) if calls else 0.0,
            "model_calls_p50": statistics.median(calls) if calls else 0.0,
            "wall_ms_p50": _quantile(walls, 0.5), "wall_ms_p95": _quantile(walls, 0.95),
            "errors": sum(r["error"] is not None for r in records)}


def _quantile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))] \
        if ordered else 0.0


def table(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Rows summarised overall and per group."""
    out: dict[str, Any] = {}
    for row in dict.fromkeys(r["row"] for r in records):
        mine = [r for r in records if r["row"] == row]
        out[row] = {"all": summarize(mine), **{
            g: summarize([r for r in mine if r["group"] == g])
            for g in dict.fromkeys(r["group"] for r in mine)}}
    return out


def samples(records: Sequence[dict[str, Any]]) -> list[Sample]:
    """The probe's first-leaf features, labelled (abstention_fit.Label)."""
    out = []
    for r in records:
        if r["row"] != PROBE or r["verdict"] is None:
            continue
        out.append(Sample(AbstentionFeatures.from_dict(r["verdict"]["features"]),
                          label(r["verdict"]["leaf"], r["gold"])))
    return out


def replay(records: Sequence[dict[str, Any]], options: AbstentionOptions) -> dict[str, Any]:
    """The probe's dev rows without and with the fitted check (replayed on its features):
    a probe run's first leaf is what the router would call."""
    probe = [r for r in records if r["row"] == PROBE]
    rows: list[dict[str, Any]] = []
    for r in probe:
        leaf = [r["verdict"]["leaf"]] if r["verdict"] else []
        stops = bool(leaf) and options.abstains(
            AbstentionFeatures.from_dict(r["verdict"]["features"]))
        for row, called in (("router (first leaf)", leaf),
                            ("router+abstain (replayed)", [] if stops else leaf)):
            rows.append({**r, "row": row, "called": called,
                         "success": tuple(called) == tuple(r["gold"])})
    return table(rows)


def replay_beside(records: Sequence[dict[str, Any]],
                  options: AbstentionOptions) -> dict[str, Any]:
    """The router row as measured, and beside it the router with the check: where the check
    stops the probe's first leaf, no call at the probe's cost; elsewhere the router's own run
    (the check is consulted only there, so the run is the same) plus the check's calls."""
    probes = {(r["group"], r["id"]): r for r in records if r["row"] == PROBE}
    rows: list[dict[str, Any]] = []
    for r in records:
        if r["row"] != ROWS[0]:
            continue
        p = probes[(r["group"], r["id"])]
        verdict = p["verdict"]
        stops = verdict is not None and \
            options.abstains(AbstentionFeatures.from_dict(verdict["features"]))
        rows.append(r)
        if stops:
            rows.append({**p, "row": "router+abstain (replayed)", "called": [],
                         "success": not r["gold"]})
        else:
            extra = verdict["model_calls"] if verdict else 0
            rows.append({**r, "row": "router+abstain (replayed)",
                         "model_calls": r["model_calls"] + extra})
    rows += [r for r in records if r["row"] == "evidence alone"]
    return table(rows)


def tradeoff(fitted: Sequence[Sample], options: AbstentionOptions) -> list[dict[str, Any]]:
    """Each dev threshold the fitted weights allow: the out-of-scope first leaves it stops
    and the in-scope successes it stops (the choice `--max-call-loss` makes)."""
    values = sorted({options.fit(s.features) for s in fitted})
    stops = [s for s in fitted if s.label is Label.ABSTAIN]
    calls = [s for s in fitted if s.label is Label.CALL]
    out = []
    for t in [*values, math.inf]:
        out.append({"threshold": t if math.isfinite(t) else "inf",
                    "out_of_scope_stopped": sum(options.fit(s.features) < t for s in stops),
                    "successes_stopped": sum(options.fit(s.features) < t for s in calls)})
    return out
