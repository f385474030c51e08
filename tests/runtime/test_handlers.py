"""Leaf handlers: the import-path allowlist, failures and timeouts as recorded results."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import handler_fixtures
import pytest
from machine_kit import RecordingRouter, drive, events, make_machine
from stackroute.runtime.catalog import build_tree
from stackroute.runtime.errors import HandlerError
from stackroute.runtime.handlers import HandlerTable, LeafOutcome, LocalExecutor
from stackroute.runtime.router import ScriptedRouter
from stackroute.runtime.tree import CapabilityTree, Node

ALLOWED = ("handler_fixtures",)


def leaf(handler: str | None, name: str = "t") -> Node:
    return Node(name=name, path=("tools", name), description="", handler=handler)


def tools_tree(*leaves: dict[str, Any]) -> CapabilityTree:
    return build_tree({"name": "root", "description": "",
                       "children": [{"name": "tools", "description": "Tools.",
                                     "children": list(leaves)}]})


@pytest.fixture
def release() -> Iterator[None]:
    handler_fixtures.RELEASE.clear()
    yield
    handler_fixtures.RELEASE.set()  # let a timed-out handler's thread finish


@pytest.mark.parametrize(("allowed", "module", "is_allowed"), [
    (("acme.tools",), "acme.tools", True),
    (("acme.tools",), "acme.tools.billing", False),  # exact: a package allows no submodule
    (("acme.tools.billing",), "acme.tools.billing", True),
    (("acme.tools",), "acme.toolsx", False),
    (("acme.tools",), "acme", False),
    (("acme.tools", "other.x"), "other.x", True),
    (("other.x:f",), "other.x", False),  # an exact ref allows that function, not its module
    ((), "os", False),
])
def test_allowlist_prefixes(allowed: tuple[str, ...], module: str, is_allowed: bool) -> None:
    assert HandlerTable(allowed_modules=allowed).is_allowed(module) is is_allowed


def test_import_path_inside_the_allowlist_resolves() -> None:
    table = HandlerTable(allowed_modules=ALLOWED)
    assert table.resolve(leaf("handler_fixtures:add")) is handler_fixtures.add


@pytest.mark.parametrize(("allowed", "ref", "message"), [
    ((), "os:system",
     "handler 'os:system' of tools/t is outside the allowed modules (none configured)"),
    (ALLOWED, "subprocess:run",
     "handler 'subprocess:run' of tools/t is outside the allowed modules (handler_fixtures)"),
    (("nosuch.mod",), "nosuch.mod:f",
     "unknown handler 'nosuch.mod:f' of tools/t: cannot import 'nosuch.mod' (No module named "
     "'nosuch')"),
    (ALLOWED, "handler_fixtures:nope",
     "unknown handler 'handler_fixtures:nope' of tools/t: handler_fixtures has no callable "
     "'nope'"),
    (ALLOWED, "handler_fixtures:NOT_CALLABLE",
     "unknown handler 'handler_fixtures:NOT_CALLABLE' of tools/t: handler_fixtures has no "
     "callable 'NOT_CALLABLE'"),
])
def test_import_path_refusals(allowed: tuple[str, ...], ref: str, message: str) -> None:
    table = HandlerTable(allowed_modules=allowed)
    with pytest.raises(HandlerError) as info:
        table.resolve(leaf(ref))
    assert str(info.value) == message
    assert info.value.code == "invalid_handler"


def test_problems_lists_every_unresolvable_leaf() -> None:
    tree = tools_tree({"name": "ok", "handler": "handler_fixtures:add"},
                      {"name": "outside", "handler": "os:getcwd"},
                      {"name": "missing", "handler": "handler_fixtures:missing"},
                      {"name": "plain"})
    problems = HandlerTable(allowed_modules=ALLOWED).problems(tree)
    assert [p.path for p in problems] == ["tools/outside", "tools/missing"]


def test_a_bound_handler_wins_over_the_import_path() -> None:
    def bound(**_: Any) -> str:
        return "bound"

    table = HandlerTable({"tools/t": bound})
    assert table.resolve(leaf("os:system")) is bound
    table.bind("tools/u", handler_fixtures.add)
    assert table.resolve(leaf(None, "u")) is handler_fixtures.add
    assert HandlerTable().resolve(leaf(None)) is None


@pytest.mark.parametrize(("ref", "arguments", "expected"), [
    (None, {"x": 1, "y": [2]}, LeafOutcome(result={"x": 1, "y": [2]})),
    ("handler_fixtures:add", {"a": 2, "b": 3}, LeafOutcome(result=5)),
    ("handler_fixtures:boom", {}, LeafOutcome(error="ValueError: bad input for boom")),
    ("handler_fixtures:upstream_timeout", {},
     LeafOutcome(error="TimeoutError: upstream service timed out")),
    ("handler_fixtures:add", {"a": 1}, LeafOutcome(
        error="TypeError: add() missing 1 required positional argument: 'b'")),
    ("os:system", {}, LeafOutcome(
        error="handler 'os:system' of tools/t is outside the allowed modules "
              "(handler_fixtures)")),
])
def test_local_executor_outcomes(ref: str | None, arguments: dict[str, Any],
                                 expected: LeafOutcome) -> None:
    executor = LocalExecutor(HandlerTable(allowed_modules=ALLOWED), timeout_s=5.0)
    assert executor.execute(leaf(ref), arguments, "call-0") == expected


def test_local_executor_timeout(release: None) -> None:
    executor = LocalExecutor(HandlerTable(allowed_modules=ALLOWED), timeout_s=0.05)
    outcome = executor.execute(leaf("handler_fixtures:wait_for_release"), {}, "call-0")
    assert outcome == LeafOutcome(error="handler timed out after 0.05 s; it is still running "
                                        "in the background and may yet take effect")


FAILING_TREE = [
    {"name": "boom", "description": "Fails.", "handler": "handler_fixtures:boom"},
    {"name": "slow", "description": "Hangs.", "handler": "handler_fixtures:wait_for_release"},
    {"name": "outside", "description": "Not allowed.", "handler": "os:getcwd"},
    {"name": "echo", "description": "Routing only.",
     "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}},
]


@pytest.mark.parametrize(("choice", "arguments", "error", "result"), [
    ("boom", {}, "ValueError: bad input for boom", None),
    ("slow", {}, "handler timed out after 0.05 s; it is still running in the background and "
                 "may yet take effect", None),
    ("outside", {}, "handler 'os:getcwd' of tools/outside is outside the allowed modules "
                    "(handler_fixtures)", None),
    ("echo", {"q": "hi"}, None, {"q": "hi"}),
])
def test_failures_are_recorded_leaf_results_not_crashes(
        release: None, choice: str, arguments: dict[str, Any], error: str | None,
        result: Any) -> None:
    tree = tools_tree(*FAILING_TREE)
    router = RecordingRouter(ScriptedRouter(["tools", (choice, arguments), "DONE", "DONE"]))
    machine = make_machine(router, tree=tree)
    machine.executor = LocalExecutor(HandlerTable(allowed_modules=ALLOWED), timeout_s=0.05)
    state = machine.start("do it", run_id="r")
    drive(machine, state)
    assert state.status.value == "done"
    told = (f"{choice} failed: {error}" if error else f"{choice} returned: {json.dumps(result)}")
    assert router.prompts[2].messages[-1].content == (
        f"{told}\nAnswer with the next option, or DONE.")
    [leaf_result] = [e for e in state.trace if e.kind.value == "leaf_result"]
    assert leaf_result.error == error
    assert leaf_result.detail["result"] == result
    entry = {"path": f"tools/{choice}", "arguments": arguments}
    entry.update({"error": error} if error else {"result": result})
    assert state.result == [{"path": "tools", "output": [entry]}]
    assert events(state) == [
        ("start", ""), ("route", ""), ("push", "tools"), ("route", "tools"),
        ("leaf_pending", "tools"), ("leaf_result", "tools"), ("route", "tools"),
        ("pop_done", "tools"), ("route", ""), ("finish", "")]


def test_handler_results_are_kept_as_json(release: None) -> None:
    tree = tools_tree({"name": "odd", "description": "Odd result.",
                       "handler": "handler_fixtures:odd_result"})
    machine = make_machine(["tools", "odd", "DONE", "DONE"], tree=tree,
                           handlers=HandlerTable(allowed_modules=ALLOWED))
    state = machine.start("odd", run_id="r")
    drive(machine, state)
    expected = {"pair": [1, 2], "tags": "{'only'}", "3": "int key"}
    assert state.calls[0]["result"] == expected
    state.to_json()  # serialisable


def test_a_handler_reads_its_call_id_and_the_model_cannot_set_it() -> None:
    """The call id reaches the handler out of band (`current_call`), never as an argument: a
    model answering `call_id` as an argument only sets an argument."""
    tree = build_tree({"name": "root", "children": [
        {"name": "pay", "description": "pay", "handler": "handler_fixtures:whoami",
         "parameters": {"type": "object", "properties": {"call_id": {"type": "string"}}}}]})
    executor = LocalExecutor(HandlerTable(allowed_modules=["handler_fixtures"]))
    leaf = tree.node("pay")
    outcome = executor.execute(leaf, {"call_id": "forged"}, "run-7:3")
    assert outcome.error is None
    assert outcome.result == {"call_id": "run-7:3", "leaf": "pay",
                              "arguments": {"call_id": "forged"}}
    from stackroute.runtime.handlers import current_call

    with pytest.raises(HandlerError, match="only available inside a running leaf handler"):
        current_call()


# -- issue 15.2: no code runs at upload beyond the operator's own modules ---------------------
@pytest.mark.parametrize("ref", ["handler_pkg.scripts.wipe:x", "handler_pkg.__main__:x",
                                 "handler_pkg.scripts:x"])
def test_a_submodule_of_an_allowed_module_is_refused_without_importing_it(
        ref: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    marker = tmp_path / "wipe.log"
    monkeypatch.setenv("STACKROUTE_TEST_WIPE_MARKER", str(marker))
    table = HandlerTable(allowed_modules=["handler_pkg", "handler_pkg.tools"])
    tree = tools_tree({"name": "t", "handler": ref},
                      {"name": "ok", "handler": "handler_pkg.tools:add"})
    problems = table.problems(tree)
    assert [p.path for p in problems] == ["tools/t"]
    assert "outside the allowed modules" in problems[0].message
    assert not marker.exists()
    assert ref.partition(":")[0] not in sys.modules


def test_an_allowed_module_that_fails_to_import_is_a_problem_of_its_leaf() -> None:
    table = HandlerTable(allowed_modules=["handler_exits"])
    problems = table.problems(tools_tree({"name": "t", "handler": "handler_exits:f"}))
    assert [p.path for p in problems] == ["tools/t"]
    assert "SystemExit" in problems[0].message and "handler_exits ran" in problems[0].message


def test_an_exact_ref_allows_that_function_only() -> None:
    table = HandlerTable(allowed_modules=["handler_fixtures:add"])
    assert table.resolve(leaf("handler_fixtures:add")) is handler_fixtures.add
    with pytest.raises(HandlerError, match="outside the allowed"):
        table.resolve(leaf("handler_fixtures:boom"))


# -- issue 15.7: a call reported "timed out" must not run later --------------------------------
def test_a_queued_call_that_times_out_never_runs(release: None) -> None:
    ran: list[str] = []
    table = HandlerTable({"tools/late": lambda: ran.append("late")},
                         allowed_modules=ALLOWED)
    executor = LocalExecutor(table, timeout_s=0.1)
    busy = [executor.execute(leaf("handler_fixtures:wait_for_release", f"b{i}"), {}, f"c{i}")
            for i in range(4)]  # every handler thread is now held
    assert all("timed out" in (o.error or "") and "still running" in (o.error or "")
               for o in busy)
    late = executor.execute(leaf(None, "late"), {}, "c-late")
    assert late.error is not None and "never started" in late.error
    handler_fixtures.RELEASE.set()
    executor.close()
    assert ran == []
