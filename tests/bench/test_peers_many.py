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
from stackroute.bench.peers.many_tables import markdown_many, request_row, summarize_many
from stackroute.bench.peers.system import CallOutcome, run_item
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


def test_the_requests_are_also_queries_for_a_system_that_routes_them(workload: Any) -> None:
    ids = [r.item_id for r in workload.requests] + [workload.code_warm_up.item_id]
    assert [q.id for q in workload.queries] == ids
    for query, item in zip(workload.queries, workload.requests, strict=False):
        assert query.query in text(item.calls[0])  # the request the calls were rendered for
        kinds = [c.kind for c in item.calls]
        leaf = item.calls[kinds.index(CallKind.ARGUMENTS) - 1].gold  # the descent's last answer
        assert len(query.gold) == 1 and query.gold[0].rsplit("/", 1)[-1] == leaf
        assert workload.tree.node(query.gold[0]).is_leaf


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


def router_record(item_id: str, *, success: bool, args_success: bool) -> dict[str, Any]:
    return {"item_id": item_id, "system": "ours-router", "kind": "request", "latency_ms": 10.0,
            "prefill_tokens": 5, "prompt_tokens": 50, "forward_passes": 4, "model_calls": 4,
            "text": ["a/b"], "gold": ["a/b"], "success": success,
            "args_success": args_success, "request_index": 1}


def test_a_routed_request_is_read_from_its_own_record_and_forced_ones_from_their_calls(
        workload: Any) -> None:
    forced = [{**r, "request_index": 1} for r in run_item(
        ScriptedSystem("ours", []), workload.requests[1])]
    wrong_arguments = [{**r, "text": "{}"} if r["kind"] == "arguments" else r for r in forced]
    row = request_row(wrong_arguments)
    assert (row["requests_routed_on_gold"], row["exact_calls"]) == (1, 0)
    assert row["model_calls_mean"] == len(forced)  # a teacher-forced call is a model call
    row = request_row([router_record("q1", success=True, args_success=False),
                       router_record("q2", success=True, args_success=True),
                       router_record("q3", success=False, args_success=False)])
    assert (row["n"], row["requests_routed_on_gold"], row["exact_calls"]) == (3, 2, 1)
    assert row["model_calls_mean"] == 4 and row["num_decisions"] == 0


def test_the_router_system_runs_with_the_many_workload_only(
        capsys: pytest.CaptureFixture[str]) -> None:
    from stackroute.bench.experiments.peers import main

    with pytest.raises(SystemExit) as refused:
        main(["--workload", "mixed", "--systems", "ours,ours-router"])
    assert refused.value.code == 2
    assert "ours-router routes whole requests" in capsys.readouterr().err


@pytest.mark.model
def test_the_smoke_size_runs_through_the_command_line(tmp_path: Path) -> None:
    from stackroute.bench.experiments.peers import main

    out = tmp_path / "many"
    assert main(["--workload", "many", "--smoke", "--systems",
                 "ours,ours-path,xgrammar,ours-router", "--leaves", "16",
                 "--max-argument-tokens", "16", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["num_requests_run"] == 2 and summary["workload"] == "many"
    for system in ("ours", "ours-path", "xgrammar", "ours-router"):
        assert summary["requests"]["first"][system]["n"] == 1
        assert summary["requests"]["later"][system]["n"] == 1
        assert summary["warm_costs"][system]["prefill_tokens"] > 0
    assert "request_later_p50" in summary["ratios"]
    assert "ours-router request_later_p50" in summary["ratios"]
    # the product's router wrote one record per request, scored against the gold call
    routed = [r for r in records_of(out) if r["system"] == "ours-router"]
    assert [r["request_index"] for r in routed] == [0, 1]
    assert all(isinstance(r["success"], bool) and r["model_calls"] >= 1 for r in routed)
    # ours-path answers every call under the same prompt, in fewer passes
    records = records_of(out)
    answers = {s: [r["text"] for r in records if r["system"] == s and r["kind"] == "decision"]
               for s in ("ours", "ours-path")}
    assert answers["ours-path"] == answers["ours"]
    later = summary["requests"]["later"]
    assert later["ours-path"]["forward_passes_mean"] < later["ours"]["forward_passes_mean"]


def records_of(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "calls.jsonl").read_text().splitlines()]
