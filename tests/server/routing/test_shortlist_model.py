"""Tier (c): a shortlisted request with the real SmolLM2-135M engine and the real MiniLM
evidence routes to its leaf, and every routing call's tokens extend the previous call's
(a shortlisted turn, and after OTHER the full menu, are appended, never rewritten)."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from stackroute.runtime.catalog import load_catalog
from stackroute.runtime.decision import Decision
from stackroute.runtime.prompt import Prompt
from stackroute.runtime.router import RoutingRequest
from stackroute.server.engines.transformers_engine import TransformersEngine
from stackroute.server.routing.calibration import router_options
from stackroute.server.routing.router import build_machine, build_router
from stackroute.server.routing.shortlist import ShortlistOptions
from stackroute.server.tools.evaluate import Query, run_query

pytestmark = pytest.mark.model

ROOT = Path(__file__).resolve().parents[3]


class Recording:
    """The engine router, keeping every routing prompt; `other_at` answers OTHER instead the
    first time a shortlisted menu at that path is asked (to walk shortlist -> OTHER -> full
    menu with the real model deciding everything else)."""

    def __init__(self, inner: Any, other_at: str | None = None) -> None:
        self.inner = inner
        self.other_at = other_at
        self.shortlister = inner.shortlister
        self.options = inner.options
        self.prompts: list[Prompt] = []

    def route(self, request: RoutingRequest) -> Decision:
        self.prompts.append(request.prompt)
        if request.menu.is_shortlisted and request.node.path_str == self.other_at:
            self.other_at = None
            return Decision(choice="OTHER")
        return self.inner.route(request)


def shortlisted_run(engine: TransformersEngine, task: str, *,
                    other_at: str | None = None) -> tuple[Any, list[Prompt]]:
    tree = load_catalog(ROOT / "examples" / "bank.catalog.json")
    options = replace(router_options(engine.info.model),
                      shortlist=ShortlistOptions(margin=0.0, max_options=1))
    router = Recording(build_router(tree, engine, options=options), other_at=other_at)
    machine = build_machine(tree, engine, options=options, router=router)  # type: ignore[arg-type]
    state = run_query(machine, Query(id="q", query=task, gold=(), args=None, tags=()))
    return state, router.prompts


def assert_token_prefixes(engine: TransformersEngine, state: Any,
                          prompts: list[Prompt]) -> int:
    """Consecutive calls with no pop between them: call N's tokens (without the generation
    prompt) are a prefix of call N+1's. Returns how many pairs were checked."""
    gen = len(engine.renderer.generation_ids)
    routes = [e for e in state.trace if e.kind.value == "route"]
    assert len(routes) == len(prompts)
    checked = 0
    for (i, before), (j, after) in itertools.pairwise(enumerate(prompts)):
        between = state.trace[routes[i].seq + 1: routes[j].seq]
        if any(e.kind.value in ("pop_done", "pop_back") for e in between):
            continue
        a, b = engine.renderer.prompt_ids(before), engine.renderer.prompt_ids(after)
        assert b[:len(a) - gen] == a[:-gen], f"call {j} does not extend call {i}"
        checked += 1
    return checked


def test_a_shortlisted_request_routes_and_keeps_the_token_prefix(embedded_model: Any) -> None:
    engine = TransformersEngine(loaded=embedded_model)
    state, prompts = shortlisted_run(engine, "Send 500 dollars to Asha")
    assert [c["path"] for c in state.calls] == ["payments/send_money"]
    pushes = [e for e in state.trace if e.kind.value == "push"]
    assert pushes[0].detail["shortlist"]["options"] == ["send_money"]
    menus = [e.menu for e in state.trace if e.kind.value == "route"]
    assert ("send_money", "OTHER", "BACK") in menus
    assert assert_token_prefixes(engine, state, prompts) >= 2


def test_other_then_the_full_menu_keeps_the_token_prefix(embedded_model: Any) -> None:
    engine = TransformersEngine(loaded=embedded_model)
    state, prompts = shortlisted_run(engine, "Send 500 dollars to Asha", other_at="payments")
    decisions = [(e.path, e.decision) for e in state.trace if e.kind.value == "route"]
    assert decisions[:2] == [("", "payments"), ("payments", "OTHER")]
    menus = [e.menu for e in state.trace if e.kind.value == "route"]
    assert menus[2] == ("send_money", "pay_bill", "payment_history", "BACK")
    assert [c["path"] for c in state.calls] == ["payments/send_money"]
    assert assert_token_prefixes(engine, state, prompts) >= 2
