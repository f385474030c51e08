"""From model calls to item metrics, and from items to one summary row per group.

Pure functions of recorded data (no model), so the harness can rebuild every summary from the
JSONL alone and the tests can check them with tables of inputs.

Error breakdown. An item's `error_kind` is its first failure in call order:
- `format_failure`: an answer that could not be read as what was asked: a menu answer that is
  not exactly one menu option in the protocol's format, or arguments that are not one JSON
  object valid for the leaf's schema (also: cut off at max tokens).
- `wrong_action`: a readable menu answer of the wrong kind: a completion state (DONE/BACK)
  where a child was the gold answer, a child where a completion state was, or DONE for BACK.
  Finishing early is the typical case.
- `wrong_choice`: a readable menu answer naming a child (router or leaf) other than the gold
  child.
- `argument_error`: every routing answer right, and the arguments valid for the schema, but
  not equal to the gold arguments (compared after type coercion, as `stackroute eval` does).
- `context_exceeded`: a prompt did not fit the model's context; the item scores 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from stackroute.bench.suites.gold import ARGUMENTS, CHOOSE, COMPLETION_STATES, CallRecord

ERROR_KINDS = ("wrong_action", "wrong_choice", "argument_error", "format_failure",
               "context_exceeded")

# Item statuses: ok (the route ran), context_exceeded (scores 0), skipped (over the run's
# prompt budget: not scored), error (the harness failed on it: counted, not scored).
SCORED_STATUSES = ("ok", "context_exceeded")


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-quantile (0..1) by linear interpolation between order statistics; None if empty.

    >>> percentile([1, 2, 3, 4], 0.5), percentile([10.0], 0.95), percentile([], 0.5)
    (2.5, 10.0, None)
    >>> round(percentile(list(range(1, 101)), 0.95), 2)
    95.05
    """
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    low, high = math.floor(pos), math.ceil(pos)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def call_error(call: CallRecord) -> str | None:
    """The error kind of one call, None when it is right (see the module docstring)."""
    if call.context_exceeded:
        return "context_exceeded"
    if call.answer is None and call.usage == {}:
        return None  # never answered (over budget, or the run stopped before the engine)
    if call.problem is not None:
        return "format_failure"
    if call.is_correct:
        return None
    if call.kind == ARGUMENTS:
        return "argument_error" if call.is_args_scored else None
    is_state = call.answer in COMPLETION_STATES
    gold_is_state = call.gold in COMPLETION_STATES
    return "wrong_action" if is_state or gold_is_state else "wrong_choice"


def item_metrics(calls: Sequence[CallRecord], *, num_gold: int) -> dict[str, Any]:
    """Metrics of one forced run from its calls (units in the keys)."""
    chooses = [c for c in calls if c.kind == CHOOSE]
    arguments = [c for c in calls if c.kind == ARGUMENTS]
    errors = [e for e in (call_error(c) for c in calls) if e is not None]
    last_leaf = max((i for i, c in enumerate(chooses) if c.gold_is_leaf), default=0)
    route = chooses[: last_leaf + 1]  # the calls that route: up to the last leaf choice
    answered = [c for c in calls if c.usage]
    usage_sum = {k: sum(float(c.usage.get(k, 0)) for c in answered)
                 for k in ("prefill_tokens", "cached_tokens", "generated_tokens",
                           "forward_passes", "latency_ms")}
    routing_ok = bool(chooses) and all(call_error(c) is None and c.is_correct for c in chooses)
    args_ok = all(call_error(c) is None for c in arguments)
    segments_ok = [all(c.is_correct and c.problem is None for c in chooses if c.leaf_index == k)
                   for k in range(num_gold)]
    return {
        "success": routing_ok,
        "args_success": routing_ok and args_ok,
        "leaf_recall": sum(segments_ok) / num_gold if num_gold else float(routing_ok),
        "error_kind": errors[0] if errors else None,
        "errors": {k: errors.count(k) for k in ERROR_KINDS if k in errors},
        "num_decisions": len(chooses),
        "num_decisions_correct": sum(c.is_correct for c in chooses),
        "format_failures": sum(c.problem is not None for c in calls),
        "lenient_format_failures": sum(not c.is_lenient_valid for c in calls),
        "model_calls": len(calls),
        "routing_calls": len(chooses),
        "route_calls": len(route),
        "route_input_tokens": sum(c.prompt_tokens for c in route),
        "route_prompt_chars": sum(c.prompt_chars for c in route),
        "schema_tokens_per_call": (sum(c.schema_tokens for c in route) / len(route)
                                   if route else 0.0),
        "schema_tokens_max": max((c.schema_tokens for c in chooses), default=0),
        "input_tokens": sum(c.prompt_tokens for c in calls),
        "max_prompt_tokens": max((c.prompt_tokens for c in calls), default=0),
        "prefill_tokens": int(usage_sum["prefill_tokens"]),
        "cached_tokens": int(usage_sum["cached_tokens"]),
        "generated_tokens": int(usage_sum["generated_tokens"]),
        "forward_passes": int(usage_sum["forward_passes"]),
        "model_latency_ms": round(usage_sum["latency_ms"], 3),
        "routing_latency_ms": round(sum(float(c.usage.get("latency_ms", 0.0))
                                        for c in chooses), 3),
        "context_exceeded": any(c.context_exceeded for c in calls),
    }


def _mean(values: Iterable[float]) -> float | None:
    vs = [float(v) for v in values]
    return sum(vs) / len(vs) if vs else None


def _latencies(items: Iterable[Mapping[str, Any]], kind: str) -> list[float]:
    return [float(c["usage"]["latency_ms"]) for r in items for c in r.get("calls", [])
            if c["kind"] == kind and c.get("usage")]


def summarize_group(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One summary row over the items of a group (same catalog size and variant).

    Success rates count context-exceeded items as 0 and leave out skipped and failed items.
    Token and call means describe the gold route: `route_*` over items with gold leaves, the
    rest over items that ran. Latencies are over items that ran.
    """
    scored = [r for r in records if r["status"] in SCORED_STATUSES]
    ran = [r for r in records if r["status"] == "ok"]
    routed = [r for r in records if r.get("gold") and r.get("calls")
              and r["status"] in (*SCORED_STATUSES, "skipped")]
    wall = [float(r["wall_ms"]) for r in ran]
    routing_ms, arguments_ms = _latencies(ran, CHOOSE), _latencies(ran, ARGUMENTS)
    prompt = sum(r["metrics"]["prefill_tokens"] + r["metrics"]["cached_tokens"] for r in ran)
    breakdown = {k: sum(1 for r in scored if r["metrics"]["error_kind"] == k)
                 for k in ERROR_KINDS}

    def mean_of(rows: Sequence[Mapping[str, Any]], key: str) -> float | None:
        return _mean(r["metrics"][key] for r in rows)

    return {
        "num_items": len(records),
        "num_ran": len(ran),
        "num_context_exceeded": sum(r["status"] == "context_exceeded" for r in records),
        "num_skipped": sum(r["status"] == "skipped" for r in records),
        "num_errors": sum(r["status"] == "error" for r in records),
        "success": mean_of(scored, "success"),
        "args_success": mean_of(scored, "args_success"),
        "leaf_recall": mean_of(scored, "leaf_recall"),
        "decision_accuracy": (sum(r["metrics"]["num_decisions_correct"] for r in ran)
                              / max(1, sum(r["metrics"]["num_decisions"] for r in ran))
                              if ran else None),
        "error_breakdown": breakdown,
        "format_failures": sum(r["metrics"]["format_failures"] for r in scored),
        "format_failures_per_call": (sum(r["metrics"]["format_failures"] for r in ran)
                                     / max(1, sum(r["metrics"]["model_calls"] for r in ran))
                                     if ran else None),
        "lenient_format_failures": sum(r["metrics"]["lenient_format_failures"] for r in scored),
        "route_input_tokens_mean": mean_of(routed, "route_input_tokens"),
        "route_calls_mean": mean_of(routed, "route_calls"),
        "route_prompt_chars_mean": mean_of(routed, "route_prompt_chars"),
        "schema_tokens_per_call_mean": mean_of(routed, "schema_tokens_per_call"),
        "input_tokens_mean": mean_of(ran, "input_tokens"),
        "model_calls_mean": mean_of(ran, "model_calls"),
        "routing_calls_mean": mean_of(ran, "routing_calls"),
        "prefill_tokens_mean": mean_of(ran, "prefill_tokens"),
        "cached_tokens_mean": mean_of(ran, "cached_tokens"),
        "cache_hit_rate": (sum(r["metrics"]["cached_tokens"] for r in ran) / prompt
                           if prompt else None),
        "request_latency_ms_p50": percentile(wall, 0.5),
        "request_latency_ms_p95": percentile(wall, 0.95),
        "request_latency_ms_mean": _mean(wall),
        "routing_latency_ms_mean": mean_of(ran, "routing_latency_ms"),
        "routing_call_latency_ms_p50": percentile(routing_ms, 0.5),
        "routing_call_latency_ms_p95": percentile(routing_ms, 0.95),
        "arguments_call_latency_ms_p50": percentile(arguments_ms, 0.5),
        "arguments_call_latency_ms_p95": percentile(arguments_ms, 0.95),
        "compile_ms_total": sum(float(r.get("compile_ms", 0.0)) for r in records),
    }
