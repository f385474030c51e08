"""Tier (c): the menu-first prompt order with the real SmolLM2-135M tokenizer and engine.

Everything before the request (the system text and the root's menu) is the same for every
request on a catalog, so a second request's root call is served that prefix from the prefix
cache, and a catalog warmed on load serves it to the first request too (issue 29).
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from session_kit import BANK_CATALOG
from stackroute.runtime.catalog import build_tree
from stackroute.runtime.decision import Decision
from stackroute.runtime.machine import StackMachine
from stackroute.runtime.prompt import Prompt, PromptLayout, PromptOrder, PromptStyle
from stackroute.runtime.router import RoutingRequest, ScriptedRouter
from stackroute.runtime.tree import CapabilityTree
from stackroute.server.engines.transformers_engine import TransformersEngine
from stackroute.server.routing.options import DraftSource, RouterOptions
from stackroute.server.routing.pool import RouterPool
from stackroute.server.routing.prefix_warming import WarmScope, warm_catalog

pytestmark = pytest.mark.model


MENU = ["payments", "weather", "DONE"]


def bank_tree() -> CapabilityTree:
    return build_tree(BANK_CATALOG)


class Recording:
    """A scripted router that keeps every routing prompt."""

    def __init__(self, script: list[Any]) -> None:
        self.inner = ScriptedRouter(script)
        self.prompts: list[Prompt] = []

    def route(self, request: RoutingRequest) -> Decision:
        self.prompts.append(request.prompt)
        return self.inner.route(request)


def recorded(order: PromptOrder, task: str, script: list[Any]) -> list[Prompt]:
    tree = bank_tree()
    router = Recording(script)
    machine = StackMachine(tree, router, layout=PromptLayout(tree, PromptStyle(order=order)))
    state = machine.start(task, run_id="r")
    machine.run(state)  # balance has no handler: its failure is a result turn like any other
    return router.prompts


def header_tokens(engine: TransformersEngine, order: PromptOrder) -> int:
    layout = PromptLayout(bank_tree(), PromptStyle(order=order))
    return len(engine.renderer.prompt_ids(Prompt(layout.shared_prefix()))) - \
        len(engine.renderer.generation_ids)


def test_each_call_is_a_token_prefix_of_the_next_and_requests_share_the_header(
        engine: TransformersEngine) -> None:
    prompts = recorded(PromptOrder.MENU_FIRST, "what is my balance",
                       ["payments", "balance", "DONE", "DONE"])
    assert len(prompts) == 4
    gen = len(engine.renderer.generation_ids)
    ids = [engine.renderer.prompt_ids(p) for p in prompts]
    for before, after in itertools.pairwise(ids):
        if len(after) > len(before):  # no pop between them
            assert after[:len(before) - gen] == before[:-gen]
    other = engine.renderer.prompt_ids(
        recorded(PromptOrder.MENU_FIRST, "weather in Oslo", ["DONE"])[0])
    shared = header_tokens(engine, PromptOrder.MENU_FIRST)
    assert shared > 100  # the root's menu, not only the system text
    assert other[:shared] == ids[0][:shared] and other[shared:] != ids[0][shared:]


def test_a_second_request_prefills_only_its_own_text(embedded_model: Any) -> None:
    prefill = {}
    for order in PromptOrder:
        engine = TransformersEngine(loaded=embedded_model)
        first, second = (recorded(order, task, ["DONE"])[0]
                         for task in ("what is my balance", "weather in Oslo"))
        engine.choose(first, MENU)
        result = engine.choose(second, MENU)
        assert result.usage.cached_tokens >= header_tokens(engine, order)
        prefill[order] = result.usage.prefill_tokens
    listing = header_tokens(engine, PromptOrder.MENU_FIRST) - \
        header_tokens(engine, PromptOrder.REQUEST_FIRST)
    assert prefill[PromptOrder.MENU_FIRST] < 40  # "Request: weather in Oslo" and the markers
    # request-first prefills the root's options again for every request
    assert prefill[PromptOrder.REQUEST_FIRST] - prefill[PromptOrder.MENU_FIRST] >= 0.8 * listing


@pytest.mark.parametrize("order", list(PromptOrder))
def test_a_warmed_catalog_serves_the_first_request_its_header(embedded_model: Any,
                                                              order: PromptOrder) -> None:
    engine = TransformersEngine(loaded=embedded_model)
    pool = RouterPool(engine, RouterOptions(recovery=None, speculation=DraftSource.OFF,
                                            prompt_order=order))  # plain policy
    tree = bank_tree()
    report = warm_catalog(pool, tree, scope=WarmScope.ROOT)
    assert report.num_menus == 1 and report.usage.model_calls == 1
    machine = pool.machine(tree)
    state = machine.start("send 5 dollars to Asha", run_id="first")
    request = machine.request_for(state)
    result = engine.choose(request.prompt, request.menu.options)
    assert result.usage.cached_tokens >= header_tokens(engine, order)
