"""Traces: JSONL round trip and the indented tree `stackroute trace` prints (tier a/b)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from machine_kit import drive, make_machine
from stackroute.runtime.decision import Decision
from stackroute.runtime.governance import Limits
from stackroute.runtime.router import RoutingRequest
from stackroute.runtime.trace import EventKind, TraceEvent, format_tree, read_jsonl, write_jsonl

SMALL_RUN = ["payments", "BACK", "accounts", ("open_account", {"kind": "gold"}),
             ("open_account", {"kind": "savings"}), "DONE", "DONE"]
SMALL_TREE = [
    '! start <root> {"task": "open an account"}',
    "? <root> -> payments",
    "  > enter payments",
    "  ? payments -> BACK",
    "  < back payments",
    "? <root> -> accounts",
    "  > enter accounts",
    "  ? accounts -> open_account",
    "  ! misstep accounts arguments of open_account do not match its schema: kind: 'gold' is "
    "not one of ['savings', 'checking']",
    "  ? accounts -> open_account",
    '    * accounts/open_account({"kind": "savings"}) = {"account": "savings-1"}',
    "  ? accounts -> DONE",
    "  < done accounts",
    "? <root> -> DONE",
    '! finish <root> {"status": "done", "num_calls": 1}',
]


def small_run() -> list[TraceEvent]:
    machine = make_machine(SMALL_RUN)
    state = machine.start("open an account", run_id="r")
    drive(machine, state)
    return state.trace


def test_format_tree_exact_for_a_small_run() -> None:
    assert format_tree(small_run()) == SMALL_TREE


def test_format_tree_gates_limits_alerts_probabilities_and_errors() -> None:
    class Router:
        def route(self, request: RoutingRequest) -> Decision:
            script = ["payments", "send_money", "DONE", "accounts", "statements",
                      "open_account", "DONE", "DONE"]
            choice = script[request.step]
            arguments = {"payee": "A", "amount": 1} if choice == "send_money" else (
                {"kind": "savings"} if choice == "open_account" else None)
            return Decision(choice=choice, arguments=arguments,
                            probabilities={choice: 0.875})

    machine = make_machine(Router(), limits=Limits(max_depth=2, max_branch_switches=1))
    state = machine.start("pay", run_id="r")
    drive(machine, state, gate=lambda pending: False)
    assert format_tree(state.trace) == [
        '! start <root> {"task": "pay"}',
        "? <root> -> payments p=0.88",
        "  > enter payments",
        "  ? payments -> send_money p=0.88",
        '  ! gate_pause payments {"leaf": "payments/send_money", "call_id": "r:0", '
        f'"digest": "{state.trace[5].detail["digest"]}"}}',
        '  ! gate_reject payments {"call_id": "r:0"}',
        "  ? payments -> DONE p=0.88",
        "  < done payments",
        "? <root> -> accounts p=0.88",
        "  > enter accounts",
        '! alert <root> {"alert": "branch_switching", "switches": 1, "history": ["payments", '
        '"accounts"]}',
        "  ? accounts -> statements p=0.88",
        '  ! limit accounts {"limit": "max_depth", "value": 2, "child": "statements"}',
        "  ? accounts -> open_account p=0.88",
        '    * accounts/open_account({"kind": "savings"}) = {"account": "savings-1"}',
        "  ? accounts -> DONE p=0.88",
        "  < done accounts",
        "? <root> -> DONE p=0.88",
        '! finish <root> {"status": "done", "num_calls": 1}',
    ]


def test_failed_leaf_line_shows_the_error() -> None:
    event = TraceEvent(seq=0, kind=EventKind.LEAF_RESULT, frame_id=1, parent_id=0,
                       path="tools", depth=1, arguments={"a": 1}, error="ValueError: no",
                       detail={"leaf": "tools/t", "result": None})
    assert format_tree([event]) == ['    * tools/t({"a": 1}) = error: ValueError: no']


def test_jsonl_round_trip(tmp_path: Path) -> None:
    events = small_run()
    out = io.StringIO()
    write_jsonl(events, out)
    lines = out.getvalue().splitlines()
    assert len(lines) == len(events)
    assert all(json.loads(line)["seq"] == i for i, line in enumerate(lines))
    path = tmp_path / "run.trace.jsonl"
    path.write_text(out.getvalue() + "\n\n", encoding="utf-8")  # blank lines are skipped
    back = read_jsonl(path)
    assert back == events
    assert [e.comparable() for e in back] == [e.comparable() for e in events]
    assert format_tree(back) == SMALL_TREE


def test_comparable_drops_only_time_and_latency() -> None:
    event = TraceEvent(seq=3, kind=EventKind.ROUTE, frame_id=0, parent_id=None, path="",
                       menu=("a", "DONE"), decision="a", usage={"model_calls": 1,
                                                                "latency_ms": 9.5},
                       time_unix=123.0)
    assert event.comparable() == {"seq": 3, "kind": "route", "frame_id": 0, "parent_id": None,
                                  "path": "", "depth": 0, "menu": ["a", "DONE"],
                                  "decision": "a", "usage": {"model_calls": 1}}
    assert event.to_dict()["time_unix"] == 123.0


@pytest.mark.parametrize(("line", "why"), [
    ("not json", "Expecting value"),
    ('{"kind": "route"}', "'seq'"),
    ('{"seq": 0, "kind": "bogus"}', "'bogus' is not a valid EventKind"),
    ("[1, 2]", "expected a JSON object, got list"),
])
def test_read_jsonl_names_the_bad_line(tmp_path: Path, line: str, why: str) -> None:
    path = tmp_path / "bad.jsonl"
    good = json.dumps(small_run()[0].to_dict())
    path.write_text(f"{good}\n{line}\n", encoding="utf-8")
    with pytest.raises(ValueError, match=f"bad.jsonl:2: not a trace event: .*{why}"):
        read_jsonl(path)
