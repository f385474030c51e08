"""A suite run's files: its JSONL item records (appended, torn lines tolerated, the latest
attempt per key), its JSON files, and the summary built from them."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stackroute.bench.environment import environment
from stackroute.bench.suites.aggregate import item_metrics, summarize_group
from stackroute.bench.suites.gold import CallRecord
from stackroute.bench.suites.scenarios import Group
from stackroute.bench.workloads.generate import GENERATOR_VERSION

if TYPE_CHECKING:
    from stackroute.bench.suites.harness import BenchOptions

log = logging.getLogger(__name__)


def build_summary(suite: str, description: str, records: Sequence[dict[str, Any]],
                  groups: Sequence[Group], config: dict[str, Any], options: BenchOptions,
                  ) -> dict[str, Any]:
    """The summary of a suite: provenance, then one row per group (in suite order).

    Provenance (command, hardware, versions, commit) is that of the last invocation that ran
    items; every invocation is listed, since a resumed run may span several."""
    by_group: dict[str, list[dict[str, Any]]] = {}
    for r in records:  # metrics are recomputed from the calls, so old files read like new
        calls = [CallRecord.from_dict(c) for c in r["calls"]]
        r = {**r, "metrics": item_metrics(calls, num_gold=len(r["gold"]))}
        by_group.setdefault(r["key"].rsplit("/", 1)[0], []).append(r)
    rows = []
    for g in groups:
        rows.append({"group": g.name, "num_leaves": g.num_leaves, **g.variant.to_dict(),
                     "description_chars_max": g.style.max_description_chars,
                     **summarize_group(by_group.get(g.name, []))})
    info = config.get("engine_info", {})
    invocations = config.get("invocations", [])
    last: dict[str, Any] = invocations[-1] if invocations else {
        "command": options.command, "environment": environment()}
    return {
        "suite": suite,
        "description": description,
        "engine": info.get("engine", options.engine),
        "model": info.get("model", options.model),
        "max_context_tokens": info.get("max_context_tokens"),
        "dtype": info.get("dtype"),
        "seed": options.seed,
        "is_smoke": options.is_smoke,
        "limit": options.limit,
        "max_prompt_tokens": options.prompt_budget,
        "generator_version": GENERATOR_VERSION,
        "command": last["command"],
        **last["environment"],
        "invocations": [{k: v for k, v in i.items() if k != "environment"}
                        | {"load_average_1m": i["environment"]["hardware"]["load_average_1m"]}
                        for i in invocations],
        "num_items": len(records),
        "num_errors": sum(r["status"] == "error" for r in records),
        "items_wall_s": round(sum(float(r.get("wall_ms", 0.0)) for r in records) / 1e3, 1),
        "groups": rows,
    }


def read_records(path: Path) -> list[dict[str, Any]]:
    """Every record of a JSONL file (none if it does not exist); a torn last line (a run
    killed mid-write) is ignored."""
    if not path.exists():
        return []
    records = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                log.warning("%s: ignoring an unreadable line (a run stopped mid-write?)", path)
    return records


def latest_records(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The last record of each key (a retried item replaces its failed attempt)."""
    latest: dict[str, dict[str, Any]] = {}
    for r in records:
        latest[r["key"]] = r
    return list(latest.values())


def append_record(path: Path, record: dict[str, Any]) -> None:
    line = json.dumps(record, ensure_ascii=False) + "\n"
    if path.exists() and path.stat().st_size > 0:
        with open(path, "rb") as f:  # after a torn last line (a killed run): a fresh line
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b"\n":
                line = "\n" + line
    with open(path, "a", encoding="utf-8") as f:
        f.write(line)


def write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
