"""`stackroute bench peers --workload many`: the workload builder (menu-first prompts, a shared
header, gold on every call), the timed loop (no cache cleared between requests, the catalog
warmed first), the tables (first request apart), and the smoke size through the command line.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from stackroute.bench.peers.many import (
    CARRIES_CACHE,
    MANY_LEAVES,
    WarmOnLoad,
    common_prefix,
    many_workload,
)
from stackroute.bench.peers.many_run import run_many
from stackroute.bench.peers.many_tables import markdown_many, summarize_many
from stackroute.bench.peers.system import CallOutcome
from stackroute.bench.peers.workload import CallKind, ModelCall
from stackroute.runtime.prompt import Prompt


class CharRenderer:
    """A renderer double: one id per character of each message (role, then content)."""

    def prompt_ids(self, prompt: Prompt) -> list[int]:
        return [ord(c) for m in prompt.messages for c in f"<{m.role}>{m.content}"]


def text(call: ModelCall) -> str:
    return "".join(chr(i) for i in call.prompt_ids)


@pytest.fixture(scope="module")
def workload() -> Any:
    return many_workload(CharRenderer(), num_requests=5)


def test_the_default_catalog_is_the_cache_suites_128_tools(workload: Any) -> None:
    assert MANY_LEAVES == 128 and workload.catalog == "scale-up-128"
    assert len(workload.requests) == 5
    assert workload.code_warm_up.item_id not in {r.item_id for r in workload.requests}


def test_prompts_are_menu_first_and_share_the_header(workload: Any) -> None:
    first = text(workload.requests[0].calls[0])
    assert first.index("Options:") < first.index("Request:")  # the root menu, then the request
    ids = [r.calls[0].prompt_ids for r in workload.requests]
    assert workload.num_shared_tokens >= common_prefix(ids) > first.index("Options:")
    # the warm call shares that header too: it is what warming on load computes
    assert common_prefix([workload.warm_call.prompt_ids, *ids]) == workload.num_shared_tokens


def test_every_call_extends_or_returns_to_a_prefix_and_carries_gold(workload: Any) -> None:
    for item in workload.requests:
        kinds = [c.kind for c in item.calls]
        assert kinds.count(CallKind.ARGUMENTS) == 1
        assert all(c.gold is not None for c in item.calls)
        arguments = next(c for c in item.calls if c.kind is CallKind.ARGUMENTS)
        assert isinstance(json.loads(arguments.gold or ""), dict)
        assert item.calls[-1].gold == "DONE"


def test_too_many_requests_for_the_catalog_is_refused() -> None:
    with pytest.raises(ValueError, match="single-tool queries"):
        many_workload(CharRenderer(), num_leaves=16, num_requests=40)


class ScriptedSystem:
    """Answers gold, logs what it was asked and when its cache was cleared."""

    def __init__(self, name: str, log: list[tuple[str, str]]) -> None:
        self.name = name
        self.log = log

    def prepare(self, calls: Sequence[ModelCall]) -> None:
        pass

    def run(self, call: ModelCall) -> CallOutcome:
        self.log.append((self.name, "warm" if call.gold is None else "call"))
        return CallOutcome(text=call.gold or "x", forward_passes=1,
                           prefill_tokens=len(call.prompt_ids), generated_tokens=1,
                           finish_reason="stop")

    def clear_cache(self) -> None:
        self.log.append((self.name, "clear"))


def test_caches_are_cleared_once_before_warming_and_never_between_requests(
        workload: Any) -> None:
    log: list[tuple[str, str]] = []
    systems = [ScriptedSystem("ours", log), ScriptedSystem("xgrammar", log)]
    run = run_many(systems, workload, warm=WarmOnLoad.ROOT)
    for name in ("ours", "xgrammar"):
        mine = [what for who, what in log if who == name]
        assert mine.count("clear") == 1
        after = mine[mine.index("clear") + 1:]
        assert after[0] == "warm" and "clear" not in after  # warmed, then every request
    assert set(run.warm_costs) == {"ours", "xgrammar"}
    assert run.num_requests_run == 5
    firsts = [r["system"] for r in run.records if r["call_index"] == 0]
    assert firsts[:2] == ["ours", "xgrammar"] and firsts[2:4] == ["xgrammar", "ours"]


def test_tables_report_the_first_request_apart_and_the_ratio(workload: Any) -> None:
    log: list[tuple[str, str]] = []
    run = run_many([ScriptedSystem("ours", log), ScriptedSystem("xgrammar", log)], workload,
                   warm=WarmOnLoad.NONE)
    assert run.warm_costs == {}
    summary = summarize_many(run.records, ["ours", "xgrammar"], facts={
        "catalog": workload.catalog, "num_requests_run": run.num_requests_run,
        "num_shared_tokens": workload.num_shared_tokens, "warm": "none", "warm_costs": {},
        "carries_cache": {"ours": CARRIES_CACHE["ours"],
                          "xgrammar": CARRIES_CACHE["xgrammar"]}})
    first, later = summary["requests"]["first"]["ours"], summary["requests"]["later"]["ours"]
    assert first["n"] == 1 and later["n"] == 4
    assert later["decisions_on_gold"] == later["num_decisions"]
    assert later["arguments_on_gold"] == later["num_arguments"] == 4
    assert later["requests_routed_on_gold"] == 4
    assert summary["ratios"]["request_later_p50"]["best_peer"] == "xgrammar"
    table = markdown_many(summary)
    assert "Second and later requests" in table and "request_later_p50" in table


@pytest.mark.model
def test_the_smoke_size_runs_through_the_command_line(tmp_path: Path) -> None:
    from stackroute.bench.experiments.peers import main

    out = tmp_path / "many"
    assert main(["--workload", "many", "--smoke", "--systems", "ours,ours-path,xgrammar",
                 "--leaves", "16", "--max-argument-tokens", "16", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["num_requests_run"] == 2 and summary["workload"] == "many"
    for system in ("ours", "ours-path", "xgrammar"):
        assert summary["requests"]["first"][system]["n"] == 1
        assert summary["requests"]["later"][system]["n"] == 1
        assert summary["warm_costs"][system]["prefill_tokens"] > 0
    assert "request_later_p50" in summary["ratios"]
    # ours-path answers every call under the same prompt, in fewer passes
    records = [json.loads(line) for line in (out / "calls.jsonl").read_text().splitlines()]
    answers = {s: [r["text"] for r in records if r["system"] == s and r["kind"] == "decision"]
               for s in ("ours", "ours-path")}
    assert answers["ours-path"] == answers["ours"]
    later = summary["requests"]["later"]
    assert later["ours-path"]["forward_passes_mean"] < later["ours"]["forward_passes_mean"]
