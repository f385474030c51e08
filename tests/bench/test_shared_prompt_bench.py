"""`stackroute bench shared-prompt`: the summary arithmetic (tier a) and the smoke run with the
real embedded model (tier c)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from stackroute.bench.experiments.shared_prompt import (
    Suite,
    evenly,
    finished_indices,
    main,
    reported_rows,
    run_suite,
    side_order,
    summarize,
)
from stackroute.bench.suites.layouts import JSON_ANSWER, JsonProtocolLayout
from stackroute.runtime.catalog import load_catalog
from stackroute.runtime.governance import Limits
from stackroute.runtime.prompt import PromptOrder, PromptStyle
from stackroute.runtime.state import RunState

ROOT = Path(__file__).resolve().parents[2]
SIDES = ["full", "shortlist-0.08"]


def row(index: int, side: str, *, wall_ms: float, prefill: int, called: list[str],
        success: bool = True, is_warmup: bool = False, other: int = 0) -> dict[str, Any]:
    position = (SIDES.index(side) - index) % len(SIDES)  # rotated as run_suite does
    return {"suite": "s", "index": index, "side": side, "is_warmup": is_warmup,
            "position": position,
            "wall_ms": wall_ms, "called": called, "success": success, "args_success": False,
            "usage": {"prompt_tokens": 100, "prefill_tokens": prefill, "cached_tokens": 0,
                      "model_calls": 2},
            "frames": 2, "shortlisted_frames": 1 if side == "shortlist-0.08" else 0,
            "other_answers": other}


def test_summary_skips_warmups_and_warm_lines_and_gives_ratios() -> None:
    rows = [
        {"suite": "s", "warm": "root", "side": "shortlist-0.08", "warm_ms": 5.0},
        row(0, "full", wall_ms=999, prefill=999, called=["x"], is_warmup=True),
        row(0, "shortlist-0.08", wall_ms=999, prefill=999, called=["x"], is_warmup=True),
        row(1, "full", wall_ms=100, prefill=400, called=["a"]),
        row(1, "shortlist-0.08", wall_ms=50, prefill=100, called=["a"], other=1),
        row(2, "shortlist-0.08", wall_ms=70, prefill=300, called=["b"], success=False),
        row(2, "full", wall_ms=300, prefill=600, called=["c"]),
        row(3, "full", wall_ms=1, prefill=1, called=["d"]),  # the other side never ran it
    ]
    entry = summarize(rows)["s"]
    old, new = entry["by_side"]["full"], entry["by_side"]["shortlist-0.08"]
    assert (old["num_queries"], new["num_queries"]) == (2, 2)
    assert (old["success"], new["success"]) == (1.0, 0.5)
    assert (old["prefill_tokens_mean"], new["prefill_tokens_mean"]) == (500, 200)
    assert (old["wall_ms_p50"], new["wall_ms_p50"]) == (200, 60)
    assert (new["frames"], new["shortlisted_frames"], new["other_answers"]) == (4, 2, 1)
    versus = entry["vs_first"]["shortlist-0.08"]
    assert (entry["num_items"], versus["same_calls"]) == (2, 1)
    assert versus["ratio_prefill_tokens_mean"] == pytest.approx(0.4)
    assert versus["ratio_wall_ms_p50"] == pytest.approx(0.3)
    assert list(entry["by_side"]) == SIDES  # the baseline first, whichever ran first


class CountingSide:
    """A side that records which queries it ran (run_suite needs only these three)."""

    def __init__(self, label: str) -> None:
        self.label, self.ran = label, []

    def warm(self, tree: Any, scope: Any) -> dict[str, Any]:
        return {}

    def run(self, tree: Any, query: Any) -> dict[str, Any]:
        self.ran.append(query)
        return {"side": self.label, "wall_ms": 1.0, "success": True,
                "usage": {"prefill_tokens": 1}}


def test_a_resumed_run_skips_what_every_side_finished_but_never_the_warm_up() -> None:
    stopped = [{"suite": "s", "warm": "root", "side": "full", "warm_ms": 5.0},
               row(0, "full", wall_ms=1, prefill=1, called=[], is_warmup=True),
               row(0, "shortlist-0.08", wall_ms=1, prefill=1, called=[], is_warmup=True),
               row(1, "full", wall_ms=1, prefill=1, called=[]),
               row(1, "shortlist-0.08", wall_ms=1, prefill=1, called=[]),
               row(2, "shortlist-0.08", wall_ms=1, prefill=1, called=[])]  # stopped here
    finished = finished_indices(stopped, "s", len(SIDES))
    assert finished == {1} and finished_indices(stopped, "other", len(SIDES)) == set()
    assert [(r["index"], r["side"]) for r in reported_rows(stopped, "s")] == [
        (1, "full"), (1, "shortlist-0.08"), (2, "shortlist-0.08")]
    sides = [CountingSide(label) for label in SIDES]
    suite = Suite(name="s", tree=None, queries=["q0", "q1", "q2", "q3"])  # type: ignore[arg-type]
    written: list[str] = []

    class Sink:
        def write(self, text: str) -> None:
            written.append(text)

        def flush(self) -> None:
            pass

    rows = run_suite(suite, sides, Sink(), log=lambda line: None, finished=finished)
    assert [side.ran for side in sides] == [["q0", "q2", "q3"]] * 2
    assert sorted({r["index"] for r in rows}) == [0, 2, 3] and len(written) == 6


def test_side_order_undoes_the_rotation() -> None:
    sides = ["before", "layout", "now"]
    rows = [{"side": side, "index": index, "position": (sides.index(side) - index) % 3}
            for index in (4, 5) for side in reversed(sides)]
    assert side_order(rows) == sides


def test_evenly_spreads_over_the_file_in_order() -> None:
    assert evenly(list(range(10)), 3) == [0, 3, 6]
    assert evenly(list(range(2)), 5) == [0, 1]


def test_the_json_protocol_layout_keeps_the_menu_first_listing() -> None:
    tree = load_catalog(ROOT / "examples" / "bank.catalog.json")
    layout = JsonProtocolLayout(tree, PromptStyle(order=PromptOrder.MENU_FIRST))
    state = RunState(run_id="r", catalog=tree.name, conversation=[], limits=Limits())
    (system,) = layout.header(state)
    assert "Options:" in system.content and JSON_ANSWER in system.content
    turn = layout.menu_turn(tree.root, request="hi")
    assert turn.content.startswith("Request: hi") and turn.content.endswith(JSON_ANSWER)


@pytest.mark.model
def test_smoke_runs_the_release_sides_on_the_bank_example(tmp_path: Path) -> None:
    assert main(["--smoke", "--compare", "release", "--out", str(tmp_path),
                 "--threads", "1"]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    bank = summary["suites"]["bank"]
    assert set(bank["by_side"]) == {"before", "layout", "now"}
    assert bank["num_items"] == 2
    assert summary["routing"]["before"]["prompt_order"] == PromptOrder.REQUEST_FIRST.value
    # the root's menu is shared across requests only menu-first
    new, old = bank["by_side"]["layout"], bank["by_side"]["before"]
    assert new["prefill_tokens_mean"] < old["prefill_tokens_mean"]
    assert set(bank["vs_first"]) == {"layout", "now"}
    lines = (tmp_path / "items.jsonl").read_text().splitlines()
    assert len(lines) == 9  # one warm-up query and two reported, each under three sides
    # --from-items recomputes the same summary from the rows
    assert main(["--from-items", str(tmp_path / "items.jsonl")]) == 0
    again = json.loads((tmp_path / "summary-from-items.json").read_text())
    assert again["bank"] == bank
