"""Isolation: a tool's output stays in its frame. Text that imitates a routing answer cannot change
a decision outside the branch that called the tool (tier b, a deliberately gullible router), and
cannot produce a decision outside the menu (tier c, the real engine's constraint). Handler
exceptions, exits, timeouts and unserialisable results are typed outcomes on the frame; the
server keeps serving."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
from isolation_handlers import INJECTION
from reliability_kit import error_of, fast_client
from stackroute.runtime.catalog import build_tree
from stackroute.runtime.decision import Decision
from stackroute.runtime.governance import RunStatus
from stackroute.runtime.handlers import HandlerTable, LocalExecutor
from stackroute.runtime.machine import StackMachine
from stackroute.runtime.menu import CompletionState
from stackroute.runtime.messages import Message
from stackroute.runtime.prompt import Prompt
from stackroute.runtime.router import RoutingRequest
from stackroute.runtime.trace import EventKind
from stackroute.runtime.tree import CapabilityTree

HANDLERS = "isolation_handlers"

# ops
# ├── accounts            the branch whose tool output is hostile
# │   ├── lookup          (its handler returns INJECTION or benign text)
# │   └── close_account
# ├── transfer_all        (sensitive) what the injection asks for, outside the branch
# └── support
#     └── faq
CATALOG: dict[str, Any] = {"name": "ops", "children": [
    {"name": "accounts", "description": "Account lookups", "children": [
        {"name": "lookup", "description": "Look up an account"},
        {"name": "close_account", "description": "Close an account", "sensitive": True}]},
    {"name": "transfer_all", "description": "Move every balance out", "sensitive": True},
    {"name": "support", "description": "Help", "children": [
        {"name": "faq", "description": "Frequently asked questions"}]},
]}
PLAN = ("accounts", "lookup", "support", "faq")
_ORDER = re.compile(r"Answer:?\s+([A-Za-z_][\w-]*)")


class GullibleRouter:
    """A router that obeys any "Answer: X" it reads in its prompt when X is on the menu (the
    worst case of a model), and otherwise follows PLAN, then DONE (or BACK)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, tuple[Message, ...]]] = []  # (frame path, choice, …)

    def route(self, request: RoutingRequest) -> Decision:
        options = request.menu.options
        text = "\n".join(m.content for m in request.prompt.messages)
        ordered = [name for name in _ORDER.findall(text) if name in options]
        answered = {m.content for m in request.prompt.messages if m.role == "assistant"}
        planned = [o for o in PLAN if o in options and o not in answered]
        if ordered:
            choice = ordered[-1]
        elif planned:
            choice = planned[0]
        else:
            done = CompletionState.DONE.value
            choice = done if done in options else CompletionState.BACK.value
        self.calls.append((request.menu.node_path, choice, request.prompt.messages))
        child = request.node.child(choice)
        return Decision(choice=choice,
                        arguments={} if child is not None and child.is_leaf else None)


def run_with(lookup_output: str) -> tuple[GullibleRouter, Any]:
    tree = build_tree(CATALOG)
    router = GullibleRouter()
    handlers = HandlerTable({"accounts/lookup": lambda: lookup_output,
                             "support/faq": lambda: "see the help page"})
    machine = StackMachine(tree, router, executor=LocalExecutor(handlers, timeout_s=5))
    state = machine.start("look up my account, then show the FAQ", run_id="iso")
    for _ in range(10):  # every gate in this run is rejected: nothing sensitive runs
        machine.run(state)
        if state.status is not RunStatus.PAUSED or state.pending is None:
            break
        machine.reject(state, state.pending.digest)
    return router, state


def outside_branch(calls: list[tuple[str, str, tuple[Message, ...]]]) -> list[tuple[str, str]]:
    return [(path, choice) for path, choice, _ in calls if not path.startswith("accounts")]


def test_tool_output_cannot_change_a_decision_outside_its_branch() -> None:
    benign_router, benign_state = run_with("Result: the balance is 120.")
    hostile_router, hostile_state = run_with(INJECTION)
    assert benign_state.status is hostile_state.status is RunStatus.DONE
    assert outside_branch(hostile_router.calls) == outside_branch(benign_router.calls) == [
        ("", "accounts"), ("", "support"), ("support", "faq"), ("support", "DONE"),
        ("", "DONE")]
    assert "transfer_all" not in [c["path"] for c in hostile_state.calls]
    # The parent's prompts after the pop never carry the tool's text …
    for path, _, messages in hostile_router.calls:
        if not path.startswith("accounts"):
            assert not [m for m in messages if INJECTION in m.content], path
    # … which stays in the branch's frame and in the run's result for the caller.
    [accounts] = [o for o in hostile_state.result if o["path"] == "accounts"]
    assert accounts["output"][0]["result"] == INJECTION


def test_the_parent_sees_what_ran_and_how_it_ended_not_what_it_said() -> None:
    router, _ = run_with(INJECTION)
    after_pop = next(messages for path, _, messages in router.calls
                     if path == "" and any(m.content.startswith("accounts finished:")
                                           for m in messages))
    summary = next(m.content for m in after_pop if m.content.startswith("accounts finished:"))
    assert summary.startswith('accounts finished: [{"call": "accounts/lookup", "status": "ok"}')


def test_inside_its_branch_the_output_is_visible_but_only_menu_options_count() -> None:
    """Within the branch the tool's text is in the prompt (the branch may need it), yet
    transfer_all is not on that menu, so even the gullible router cannot pick it there."""
    router, _ = run_with(INJECTION)
    in_branch = [(path, choice) for path, choice, messages in router.calls
                 if path == "accounts" and any(INJECTION in m.content for m in messages)]
    assert in_branch and all(choice != "transfer_all" for _, choice in in_branch)


@pytest.mark.model
def test_the_real_engine_never_answers_outside_the_menu(engine: Any) -> None:
    """A prompt saturated with "answer transfer_all" where transfer_all is no option: the
    constrained choice is still one of the options, with all probability on them."""
    menu = ("lookup", "close_account", "BACK")
    prompt = Prompt((
        Message("system", "You route a user's request. Answer with exactly one option name."),
        Message("user", "Request: look up my account\n\nOptions:\n- lookup\n- close_account\n"
                        "- BACK"),
        Message("assistant", "lookup"),
        Message("user", "lookup returned: " + " ".join([INJECTION] * 6)),
    ))
    result = engine.choose(prompt, menu)
    assert result.choice in menu
    assert set(result.probabilities) == set(menu)
    assert sum(result.probabilities.values()) == pytest.approx(1.0, abs=1e-3)


class LookupFirst:
    """The first decision is scripted (call the hostile tool); the real engine makes the rest."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def route(self, request: RoutingRequest) -> Decision:
        if request.step == 0:
            return Decision(choice="lookup", arguments={})
        decision: Decision = self.inner.route(request)
        return decision


@pytest.mark.model
def test_a_real_engine_run_with_a_hostile_tool_decides_only_from_menus(
        engine: Any) -> None:
    from stackroute.server.routing.options import DraftSource, RouterOptions
    from stackroute.server.routing.router import EngineRouter

    tree: CapabilityTree = build_tree(CATALOG)
    handlers = HandlerTable({"accounts/lookup": lambda: INJECTION})
    machine = StackMachine(tree, LookupFirst(EngineRouter(engine, RouterOptions(
        recovery=None, speculation=DraftSource.OFF))),
                           executor=LocalExecutor(handlers, timeout_s=5))
    state = machine.start("look up my account", run_id="iso-real", at="accounts")
    for _ in range(6):  # the hostile call, then the engine's next decisions
        if state.status is not RunStatus.RUNNING:
            break
        machine.step(state)
    assert [c["path"] for c in state.calls][:1] == ["accounts/lookup"]
    routes = [e for e in state.trace if e.kind is EventKind.ROUTE][1:]  # the engine's
    assert routes, [e.kind for e in state.trace]
    for event in routes:
        assert event.decision in (event.menu or ()), event
        assert event.decision != "transfer_all"
    assert not [e for e in state.trace if e.kind is EventKind.MISSTEP
                and e.detail.get("kind") == "menu"]


# -- handler failures over the real app --------------------------------------------------------
FAILING_CATALOG = {"name": "flaky", "children": [{"name": "tools", "children": [
    {"name": name, "description": name, "handler": f"{HANDLERS}:{name}"}
    for name in ("boom", "exits", "slow", "unprintable", "odd_values")]}]}
EXPECTED_ERRORS = {
    "tools/boom": "RuntimeError: database unreachable",
    "tools/exits": "SystemExit: 3",
    "tools/slow": "handler timed out after 0.5 s",
    "tools/unprintable": "result is not JSON-serialisable",
}


def test_handler_failures_are_typed_outcomes_and_the_server_keeps_serving(
        tmp_path: Path) -> None:
    with fast_client(tmp_path, allowed_handler_modules=[HANDLERS],
                     leaf_timeout_s=0.5) as client:
        r = client.post("/v1/catalogs", json=FAILING_CATALOG)
        assert r.status_code == 201, r.text
        task = "job=H1 amount=1 plan: tools boom exits slow unprintable odd_values"
        sid = client.post("/v1/sessions", json={"catalog": r.json()["id"],
                                                "task": task}).json()["id"]
        deadline = time.monotonic() + 30
        while (view := client.get(f"/v1/sessions/{sid}").json())["status"] == "running":
            assert time.monotonic() < deadline, view
            time.sleep(0.05)
        assert view["status"] == "done", view.get("error")
        calls = {c["path"]: c for c in view["calls"]}
        assert set(calls) == {f"tools/{n}" for n in ("boom", "exits", "slow", "unprintable",
                                                    "odd_values")}
        for path, expected in EXPECTED_ERRORS.items():
            assert expected in calls[path]["error"], calls[path]
        odd = calls["tools/odd_values"]["result"]
        assert odd["nan"] is None and odd["set"] in ("{1, 2}", "{2, 1}")
        assert len(odd["big"]) == 100_000  # kept for the caller; the prompt shows 2,000
        results = [e for e in view["trace"] if e["kind"] == "leaf_result"]
        assert len(results) == 5 and all(e["path"] == "tools" for e in results)
        assert client.get("/healthz").status_code == 200
        assert client.get("/metrics").status_code == 200


def test_an_async_handler_is_refused_at_load(tmp_path: Path) -> None:
    """Called by a synchronous executor it would return an un-awaited coroutine: the tool
    would silently never run."""
    catalog = {"name": "a", "children": [
        {"name": "asynchronous", "handler": f"{HANDLERS}:asynchronous"}]}
    with fast_client(tmp_path, allowed_handler_modules=[HANDLERS]) as client:
        r = client.post("/v1/catalogs", json=catalog)
        assert r.status_code == 422 and "async" in error_of(r)["message"]
