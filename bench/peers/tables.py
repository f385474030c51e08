"""`stackroute bench peers`' summary: per-system latency tables, costs, ratios ours/best peer,
and whether the systems' answers agree.

A record is one system's answer to one call (`peers_bench.py` writes them to calls.jsonl):
`item_id`, `source`, `call_index`, `kind` ("decision" | "arguments"), `system`,
`latency_ms`, `text`, `forward_passes`, `prefill_tokens`, `generated_tokens`,
`finish_reason`, `gold` (a decision's teacher-forced answer). A whole request's latency is the
sum of its calls'.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from stackroute.bench.suites.aggregate import percentile

Record = Mapping[str, Any]
OURS = "ours"
TABLES = ("decision", "arguments", "request")


def _stats(values: Sequence[float]) -> dict[str, Any]:
    return {"n": len(values), "p50": percentile(values, 0.5), "p95": percentile(values, 0.95)}


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def system_rows(records: Sequence[Record], systems: Sequence[str]) -> dict[str, dict[str, Any]]:
    """{table: {system: row}}: decisions (every routing call of every request), arguments (the
    Seal-Tools argument cases and the requests' own argument calls), whole requests."""
    tables: dict[str, dict[str, Any]] = {t: {} for t in TABLES}
    for system in systems:
        mine = [r for r in records if r["system"] == system]
        decisions = [r for r in mine if r["kind"] == "decision"]
        arguments = [r for r in mine if r["kind"] == "arguments"]
        tables["decision"][system] = {
            **_stats([r["latency_ms"] for r in decisions]),
            "forward_passes_mean": _mean([r["forward_passes"] for r in decisions]),
            "prefill_tokens_mean": _mean([r["prefill_tokens"] for r in decisions]),
            "gold_agreement": sum(r["text"] == r["gold"] for r in decisions)}
        generated = sum(r["generated_tokens"] for r in arguments)
        passes = sum(r["forward_passes"] for r in arguments)
        tables["arguments"][system] = {
            **_stats([r["latency_ms"] for r in arguments]),
            "forward_passes_mean": _mean([r["forward_passes"] for r in arguments]),
            "prefill_tokens_mean": _mean([r["prefill_tokens"] for r in arguments]),
            "generated_tokens_mean": _mean([r["generated_tokens"] for r in arguments]),
            "tokens_per_pass": generated / passes if passes else None,
            "at_token_cap": sum(r["finish_reason"] == "length" for r in arguments),
            "valid_json": sum(_is_json_object(r["text"]) for r in arguments)}
        requests = _requests(mine)
        tables["request"][system] = {
            **_stats([sum(r["latency_ms"] for r in calls) for calls in requests.values()]),
            "forward_passes_mean": _mean([sum(r["forward_passes"] for r in calls)
                                          for calls in requests.values()]),
            "prefill_tokens_mean": _mean([sum(r["prefill_tokens"] for r in calls)
                                          for calls in requests.values()])}
    return tables


def by_source(records: Sequence[Record], systems: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Argument latency per workload source: {source: {system: {n, p50, p95}}}."""
    out: dict[str, dict[str, Any]] = defaultdict(dict)
    for r in records:
        if r["kind"] == "arguments":
            out[r["source"]].setdefault(r["system"], [])
    for source, per_system in out.items():
        for system in systems:
            per_system[system] = _stats([r["latency_ms"] for r in records
                                         if r["kind"] == "arguments" and r["source"] == source
                                         and r["system"] == system])
    return dict(out)


def is_ours(system: str) -> bool:
    """Our engine at any precision, step by step or a request at once, or the product's
    router (`ours`, `ours@bfloat16`, `ours-path`, `ours-router`)."""
    return system.partition("@")[0] in (OURS, "ours-path", "ours-router")


def ratios(tables: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Each of our systems / the best (lowest) peer, per table and statistic; below 1 means
    ours is faster. Keys are `TABLE_STAT` for `ours`, `SYSTEM TABLE_STAT` for another of ours
    (`ours@bfloat16 decision_p50`)."""
    out: dict[str, Any] = {}
    for table, rows in tables.items():
        peers = {s: row for s, row in rows.items() if not is_ours(s)}
        for mine in (s for s in rows if is_ours(s)):
            for stat in ("p50", "p95"):
                values = {s: row[stat] for s, row in peers.items() if row[stat] is not None}
                ours = rows[mine][stat]
                if not values or ours is None:
                    continue
                best = min(values, key=lambda s: values[s])
                key = f"{table}_{stat}" if mine == OURS else f"{mine} {table}_{stat}"
                out[key] = {"ratio": ours / values[best], "best_peer": best, "ours_ms": ours,
                            "best_peer_ms": values[best]}
    return out


def agreement(records: Sequence[Record], systems: Sequence[str]) -> dict[str, Any]:
    """Per call, do the systems give the same answer? Decisions by name; arguments as text and
    as parsed JSON. Lists every decision on which they differ."""
    calls: dict[tuple[str, int], dict[str, Record]] = defaultdict(dict)
    for r in records:
        calls[(r["item_id"], r["call_index"])][r["system"]] = r
    decisions = {k: v for k, v in calls.items()
                 if next(iter(v.values()))["kind"] == "decision"}
    arguments = {k: v for k, v in calls.items() if k not in decisions}
    disagreements = [{"item_id": k[0], "call_index": k[1], "gold": v[systems[0]]["gold"],
                      "answers": {s: v[s]["text"] for s in systems if s in v}}
                     for k, v in sorted(decisions.items())
                     if len({v[s]["text"] for s in systems if s in v}) > 1]
    out: dict[str, Any] = {"num_decisions": len(decisions),
                           "num_decisions_all_agree": len(decisions) - len(disagreements),
                           "decision_disagreements": disagreements,
                           "num_arguments": len(arguments)}
    if OURS in systems:
        for system in systems:
            if system == OURS:
                continue
            same_text = same_json = 0
            for v in arguments.values():
                if OURS in v and system in v:
                    same_text += v[OURS]["text"] == v[system]["text"]
                    parsed = _parsed(v[OURS]["text"])
                    same_json += parsed is not None and parsed == _parsed(v[system]["text"])
            out[f"arguments_same_text_as_ours_{system}"] = same_text
            out[f"arguments_same_json_as_ours_{system}"] = same_json
    return out


def markdown(summary: Mapping[str, Any]) -> str:
    """The tables of a summary (`peers_bench.summarize`) as Markdown."""
    systems = summary["systems"]
    lines: list[str] = []
    heads = {"decision": "Decisions (every routing call of every request)",
             "arguments": "Argument generations (Seal-Tools dev cases and the requests' own)",
             "request": "Whole requests (sum of a request's calls)"}
    for table in TABLES:
        rows = summary["tables"][table]
        extra = (["tokens/pass", "at cap", "valid JSON"] if table == "arguments"
                 else ["agrees with gold"] if table == "decision" else [])
        per = "request" if table == "request" else "call"
        head = ["system", "n", "p50 ms", "p95 ms", f"passes/{per}",
                f"prefilled tokens/{per}", *extra]
        lines += [f"### {heads[table]}", "", "| " + " | ".join(head) + " |",
                  "|" + "---|" * len(head)]
        for system in systems:
            row = rows[system]
            cells = [system, str(row["n"]), number(row["p50"]), number(row["p95"]),
                     number(row["forward_passes_mean"], 2), number(row["prefill_tokens_mean"], 1)]
            if table == "arguments":
                cells += [number(row["tokens_per_pass"], 2), str(row["at_token_cap"]),
                          f"{row['valid_json']}/{row['n']}"]
            if table == "decision":
                cells.append(f"{row['gold_agreement']}/{row['n']}")
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    sources = summary.get("arguments_by_source", {})
    if sources:
        lines += ["Argument generation latency by workload (p50 / p95 ms, n):", "",
                  "| workload | " + " | ".join(systems) + " |",
                  "|---|" + "---|" * len(systems)]
        for source, per_system in sources.items():
            lines.append(f"| {source} | " + " | ".join(
                f"{number(per_system[s]['p50'])} / {number(per_system[s]['p95'])} "
                f"({per_system[s]['n']})" for s in systems) + " |")
        lines.append("")
    lines += ratio_lines(summary["ratios"], "Ours / best peer")
    agree = summary["agreement"]
    lines.append(f"Decisions on which every system agrees: {agree['num_decisions_all_agree']}"
                 f"/{agree['num_decisions']}.")
    for d in agree["decision_disagreements"]:
        lines.append(f"- {d['item_id']} call {d['call_index']} (gold {d['gold']}): "
                     + ", ".join(f"{s} {a!r}" for s, a in d["answers"].items()))
    return "\n".join(lines) + "\n"


def _requests(records: Sequence[Record]) -> dict[str, list[Record]]:
    out: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        if r["is_request"]:
            out[r["item_id"]].append(r)
    return out


def _parsed(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _is_json_object(text: str) -> bool:
    return isinstance(_parsed(text), dict)


def ratio_lines(ratios: Mapping[str, Any], title: str) -> list[str]:
    """The markdown table of `ratios()` under `### title` (nothing when there are none)."""
    if not ratios:
        return []
    lines = [f"### {title} (below 1: ours is faster)", "",
             "| statistic | ours ms | best peer | its ms | ratio |", "|---|---|---|---|---|"]
    for key, r in ratios.items():
        lines.append(f"| {key} | {number(r['ours_ms'])} | {r['best_peer']} | "
                     f"{number(r['best_peer_ms'])} | {r['ratio']:.2f} |")
    return [*lines, ""]


def number(value: float | None, digits: int = 0) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"
