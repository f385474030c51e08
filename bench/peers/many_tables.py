"""The summary of `stackroute bench peers --workload many`: whole requests per system, the
first request apart from the second and later, ratios ours / best peer, the cost of warming.

Records are `run_item`'s (`system.py`) with `request_index` (0: the first timed request). A
request's latency, prefilled tokens and forward passes are the sums over its calls. Agreement
with gold: a decision equals its teacher-forced answer; an argument generation parses to the
query's gold arguments.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from stackroute.bench.peers.tables import Record, number, ratio_lines, ratios, system_rows
from stackroute.bench.suites.aggregate import percentile

PHASES = ("first", "later")  # the first timed request; the second and later


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _parsed(text: str | None) -> Any:
    try:
        return json.loads(text) if text is not None else None
    except ValueError:
        return None


def request_row(records: Sequence[Record]) -> dict[str, Any]:
    """One system's whole requests in `records`: latency p50/p95 and means of the rest. A
    teacher-forced request is routed on gold when every decision is its gold answer, and an
    exact call when its arguments are the gold ones too; `ours-router`'s one record per request
    (kind "request") says both itself."""
    requests: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        requests[r["item_id"]].append(r)
    totals = [{key: sum(r[key] for r in calls) for key in
               ("latency_ms", "prefill_tokens", "prompt_tokens", "forward_passes")}
              | {"model_calls": sum(r.get("model_calls", 1) for r in calls)}
              for calls in requests.values()]
    decisions = [r for r in records if r["kind"] == "decision"]
    arguments = [r for r in records if r["kind"] == "arguments"]
    latencies = [t["latency_ms"] for t in totals]
    return {"n": len(totals), "p50": percentile(latencies, 0.5),
            "p95": percentile(latencies, 0.95),
            "prefill_tokens_mean": _mean([t["prefill_tokens"] for t in totals]),
            "prompt_tokens_mean": _mean([t["prompt_tokens"] for t in totals]),
            "forward_passes_mean": _mean([t["forward_passes"] for t in totals]),
            "model_calls_mean": _mean([t["model_calls"] for t in totals]),
            "num_decisions": len(decisions),
            "decisions_on_gold": sum(r["text"] == r["gold"] for r in decisions),
            "num_arguments": len(arguments),
            "arguments_on_gold": sum(_is_gold_arguments(r) for r in arguments),
            "requests_routed_on_gold": sum(_is_routed(calls) for calls in requests.values()),
            "exact_calls": sum(_is_exact(calls) for calls in requests.values())}


def _is_gold_arguments(record: Record) -> bool:
    parsed = _parsed(record["text"])
    return parsed is not None and parsed == _parsed(record["gold"])


def _is_routed(calls: Sequence[Record]) -> bool:
    """Whether a request's calls went along its gold route."""
    if calls[0]["kind"] == "request":
        return bool(calls[0]["success"])
    return all(r["text"] == r["gold"] for r in calls if r["kind"] == "decision")


def _is_exact(calls: Sequence[Record]) -> bool:
    """Whether a request made its gold call: routed on gold, every argument the gold one."""
    if calls[0]["kind"] == "request":
        return bool(calls[0]["args_success"])
    return _is_routed(calls) and all(_is_gold_arguments(r) for r in calls
                                     if r["kind"] == "arguments")


def phase_rows(records: Sequence[Record],
               systems: Sequence[str]) -> dict[str, dict[str, dict[str, Any]]]:
    """{phase: {system: request_row}} for the first request and the later ones."""
    out: dict[str, dict[str, dict[str, Any]]] = {p: {} for p in PHASES}
    for system in systems:
        mine = [r for r in records if r["system"] == system]
        out["first"][system] = request_row([r for r in mine if r["request_index"] == 0])
        out["later"][system] = request_row([r for r in mine if r["request_index"] > 0])
    return out


def summarize_many(records: Sequence[Record], systems: Sequence[str], *,
                   facts: Mapping[str, Any]) -> dict[str, Any]:
    """The run's summary: `facts` (command, catalog, options, caches, warm costs…) plus the
    tables and ratios."""
    phases = phase_rows(records, systems)
    later = [r for r in records if r["request_index"] > 0]
    calls = system_rows(later, systems)
    return {**facts, "systems": list(systems), "requests": phases,
            "later_calls": {k: calls[k] for k in ("decision", "arguments")},
            "ratios": ratios({f"request_{p}": rows for p, rows in phases.items()})}


def markdown_many(summary: Mapping[str, Any]) -> str:
    """The summary's tables as Markdown."""
    systems = summary["systems"]
    lines = [f"Catalog {summary['catalog']}: {summary['num_requests_run']} requests in order, "
             f"nothing cleared between them; every request's prompt opens with the same "
             f"{summary['num_shared_tokens']} tokens (system text and the root's menu). "
             f"Warm on load: {summary['warm']}.", ""]
    heads = {"first": "First timed request", "later": "Second and later requests"}
    head = ["system", "n", "p50 ms", "p95 ms", "prefilled tokens/request",
            "prompt tokens/request", "model calls/request", "passes/request",
            "decisions on gold", "arguments on gold", "requests routed on gold",
            "exact calls"]
    for phase in PHASES:
        lines += [f"### {heads[phase]} (whole request: the sum of its calls)", "",
                  "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for system in systems:
            row = summary["requests"][phase][system]
            lines.append("| " + " | ".join([
                system, str(row["n"]), number(row["p50"]), number(row["p95"]),
                number(row["prefill_tokens_mean"], 1), number(row["prompt_tokens_mean"], 1),
                number(row["model_calls_mean"], 2), number(row["forward_passes_mean"], 2),
                f"{row['decisions_on_gold']}/{row['num_decisions']}",
                f"{row['arguments_on_gold']}/{row['num_arguments']}",
                f"{row['requests_routed_on_gold']}/{row['n']}",
                f"{row['exact_calls']}/{row['n']}"]) + " |")
        lines.append("")
    lines += ["### Calls of the second and later requests", "",
              "| system | kind | n | p50 ms | p95 ms | passes/call | prefilled tokens/call |",
              "|---|---|---|---|---|---|---|"]
    for kind, rows in summary["later_calls"].items():
        for system in (s for s in systems if rows[s]["n"]):  # ours-router: none teacher-forced
            row = rows[system]
            lines.append(f"| {system} | {kind} | {row['n']} | {number(row['p50'])} | "
                         f"{number(row['p95'])} | {number(row['forward_passes_mean'], 2)} | "
                         f"{number(row['prefill_tokens_mean'], 1)} |")
    lines.append("")
    lines += ratio_lines(summary["ratios"], "Ours / best peer, whole requests")
    lines += ["### Caches across requests, and warming the catalog (untimed)", "",
              "| system | carries its cache across requests | warm-up ms | warm-up prefilled "
              "tokens |", "|---|---|---|---|"]
    for system in systems:
        cost = summary["warm_costs"].get(system)
        lines.append(f"| {system} | {summary['carries_cache'][system]} | "
                     f"{number(cost['latency_ms']) if cost else '–'} | "
                     f"{cost['prefill_tokens'] if cost else '–'} |")
    return "\n".join(lines) + "\n"

