"""Unwinding in one pass keeps step-by-step routing's decisions, in fewer model calls.

Tier a: a deterministic fake engine (its choice is a pure function of the prompt, as greedy
decoding is) checks the kept levels, the bonus decision, the near-tie fallback and the
usage counts. Tier b: the real embedded model checks that the prompt-tree pass gives every
level the choice and probabilities of a separate `choose` on its prompt, and that a plain
run decides identically with fewer model calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest
from doubles import HashEngine
from stackroute.runtime.catalog import build_tree
from stackroute.runtime.governance import Limits
from stackroute.runtime.machine import StackMachine
from stackroute.runtime.prompt import PromptOrder
from stackroute.runtime.router import RoutingRequest, ScriptedRouter
from stackroute.runtime.speculation import unwinding_requests
from stackroute.runtime.state import RunState
from stackroute.runtime.tree import CapabilityTree
from stackroute.server.engines.base import MenuResult
from stackroute.server.engines.verification import MenuLevel
from stackroute.server.routing.options import DraftSource, RouterOptions
from stackroute.server.routing.recovery import RecoveryOptions
from stackroute.server.routing.router import EngineRouter, build_machine
from test_speculation import DEEP_CATALOG, decisions


class LevelEngine(HashEngine):
    """The fake engine with `verify_levels`; `tight` options get a near-tie margin there."""

    def __init__(self, prefer: dict[str, str] | None = None, tight: set[str] | None = None,
                 ) -> None:
        super().__init__(prefer, tight)
        self.levels_calls = 0

    def verify_levels(self, levels: Sequence[MenuLevel]) -> list[MenuResult]:
        self.levels_calls += 1
        return self._levels(levels)


def deep_level_engine(**kw: Any) -> LevelEngine:
    """Walks root → b → b1 → b1x → deep, then answers DONE back up."""
    return LevelEngine(prefer={"a": "b", "b1": "b1", "b1x": "b1x", "deep": "deep"}, **kw)


def run(tree: CapabilityTree, engine: HashEngine, *, unwinding: bool = True,
        options: RouterOptions | None = None) -> RunState:
    options = options or RouterOptions(recovery=None, speculation=DraftSource.OFF,
                                       unwinding=unwinding)
    router = EngineRouter(engine, options)  # type: ignore[arg-type]
    machine = StackMachine(tree, router, limits=Limits(max_steps=40), clock=lambda: 0.0)
    return machine.run(machine.start("do the deep thing", run_id="r1"))


def marks(state: RunState) -> list[dict[str, Any]]:
    return [dict(e.detail["unwinding"]) for e in state.trace if "unwinding" in e.detail]


def plain_decisions(state: RunState) -> list[tuple[Any, ...]]:
    return [d[:6] for d in decisions(state)]


def test_the_whole_stack_unwinds_in_one_pass() -> None:
    tree = build_tree(DEEP_CATALOG)
    reference = run(tree, deep_level_engine(), unwinding=False)
    fast_engine = deep_level_engine()
    fast = run(tree, fast_engine)
    assert plain_decisions(fast) == plain_decisions(reference)
    # b1x, b1, b and the root answer DONE: four calls become one pass.
    assert fast_engine.levels_calls == 1
    assert reference.usage.model_calls - fast.usage.model_calls == 3
    assert marks(fast) == [{"level": k, "levels": 4, "accepted": True} for k in range(4)]
    assert (fast.usage.speculated_levels, fast.usage.accepted_levels) == (4, 4)


def test_a_level_that_does_not_answer_done_is_kept_and_ends_the_unwinding() -> None:
    tree = build_tree(DEEP_CATALOG)
    # At b (after b1 finished) the engine opens b2 instead of answering DONE.
    prefer = {"a": "b", "b1": "b1", "b1x": "b1x", "deep": "deep", "b2": "b2"}

    class OpensB2(LevelEngine):
        def _pick(self, prompt: Any, options: Sequence[str]) -> str:
            if "b2" in options and "b1 finished" in prompt.messages[-1].content:
                return "b2"
            return super()._pick(prompt, options)

    reference = run(tree, OpensB2(prefer), unwinding=False)
    fast = run(tree, OpensB2(prefer))
    assert plain_decisions(fast) == plain_decisions(reference)
    first = marks(fast)[:3]
    assert first == [{"level": 0, "levels": 4, "accepted": True},
                     {"level": 1, "levels": 4, "accepted": True},
                     {"level": 2, "levels": 4, "accepted": False}]


def test_a_near_tie_routes_step_by_step_from_that_level() -> None:
    tree = build_tree(DEEP_CATALOG)

    class TightAtB(LevelEngine):
        def verify_levels(self, levels: Sequence[MenuLevel]) -> list[MenuResult]:
            out = super().verify_levels(levels)
            return [replace(r, margin=1e-6) if level.options[0] == "b1" else r
                    for r, level in zip(out, levels, strict=True)]

    reference = run(tree, deep_level_engine(), unwinding=False)
    engine = TightAtB(prefer={"a": "b", "b1": "b1", "b1x": "b1x", "deep": "deep"})
    fast = run(tree, engine)
    assert plain_decisions(fast) == plain_decisions(reference)
    # b1x and b1 kept from the first pass; b's was too close: at b a second pass (b, root)
    # is too close at its level 0 too, so b and then the root go step by step.
    assert engine.levels_calls == 2 and engine.choose_calls == 4 + 2
    assert marks(fast)[:2] == [{"level": 0, "levels": 4, "accepted": True},
                               {"level": 1, "levels": 4, "accepted": True}]


def test_a_run_unwinds_step_by_step_after_a_pass_that_saved_nothing() -> None:
    tree = build_tree(DEEP_CATALOG)

    class CallsTwice(LevelEngine):
        """Calls `deep` again after its first result (as the small model does), then DONE."""

        def _pick(self, prompt: Any, options: Sequence[str]) -> str:
            calls = sum("deep returned" in m.content for m in prompt.messages)
            if "deep" in options and calls == 1:
                return "deep"
            return super()._pick(prompt, options)

    prefer = {"a": "b", "b1": "b1", "b1x": "b1x", "deep": "deep"}
    reference = run(tree, CallsTwice(prefer), unwinding=False)
    engine = CallsTwice(prefer)
    fast = run(tree, engine)
    assert plain_decisions(fast) == plain_decisions(reference)
    assert engine.levels_calls == 1  # the pass after the first call kept only `deep`
    assert fast.usage.model_calls == reference.usage.model_calls  # a pass for a call
    assert marks(fast) == [{"level": 0, "levels": 4, "accepted": False}]


def test_no_unwinding_without_the_capability_the_option_or_the_plain_policy() -> None:
    tree = build_tree(DEEP_CATALOG)
    reference = run(tree, deep_level_engine(), unwinding=False)
    step_only = HashEngine(prefer={"a": "b", "b1": "b1", "b1x": "b1x", "deep": "deep"})
    assert plain_decisions(run(tree, step_only)) == plain_decisions(reference)
    on = RouterOptions(recovery=None, speculation=DraftSource.OFF, unwinding=True)
    assert EngineRouter(step_only, on).unwinder is None  # type: ignore[arg-type]
    assert EngineRouter(deep_level_engine(), on).unwinder is not None  # type: ignore[arg-type]
    # Off by default (slower on a 1-thread CPU, bench/results/2026-12-03-cpu-unwind).
    off = RouterOptions(recovery=None, speculation=DraftSource.OFF)
    assert EngineRouter(deep_level_engine(), off).unwinder is None  # type: ignore[arg-type]
    guided = RouterOptions(recovery=RecoveryOptions.off(), speculation=DraftSource.OFF,
                           unwinding=True)
    assert EngineRouter(deep_level_engine(), guided).unwinder is None  # type: ignore[arg-type]


# -- tier b: the real model ---------------------------------------------------------------------
BANK: dict[str, Any] = {"name": "bank", "description": "", "children": [
    {"name": "payments", "description": "Send and track payments.", "children": [
        {"name": "balance", "description": "Show the account balance."},
        {"name": "history", "description": "List recent payments."}]},
    {"name": "accounts", "description": "Open accounts and read statements.", "children": [
        {"name": "open_account", "description": "Open a new account."},
        {"name": "statements", "description": "Account statements.", "children": [
            {"name": "monthly", "description": "Show a monthly statement."},
            {"name": "yearly", "description": "Show a yearly statement."}]}]},
    {"name": "weather", "description": "Weather for a city."}]}


def unwinding_chain(tree: CapabilityTree, script: list[str], task: str,
                    ) -> list[RoutingRequest]:
    """The unwinding chain at the first request after the script's leaf call."""
    got: list[list[RoutingRequest]] = []

    def answer(request: RoutingRequest) -> str:
        if request.step < len(script):
            return script[request.step]
        got.append(unwinding_requests(request))
        return "DONE"

    machine = StackMachine(tree, ScriptedRouter(answer))
    machine.run(machine.start(task, run_id="r"))
    return got[0]


@pytest.mark.model
@pytest.mark.parametrize("script", [["accounts", "statements", "monthly"],
                                    ["payments", "balance"]])
@pytest.mark.parametrize("is_cache_enabled", [True, False])
def test_real_model_levels_equal_separate_choices(engine: Any, script: list[str],
                                                  is_cache_enabled: bool) -> None:
    from stackroute.server.engines.transformers_engine import TransformersEngine

    chain = unwinding_chain(build_tree(BANK), script, "Show my March statement")
    assert len(chain) == len(script)
    one_pass = TransformersEngine(loaded=engine.loaded, is_cache_enabled=is_cache_enabled)
    one_pass.choose(chain[0].prompt, chain[0].menu.options)  # the cache as a run leaves it
    results = one_pass.verify_levels([MenuLevel(r.prompt, r.menu.options) for r in chain])
    assert results[0].usage.model_calls == 1 and results[0].usage.forward_passes == 1
    for request, result in zip(chain, results, strict=True):
        alone = engine.choose(request.prompt, request.menu.options)
        assert result.choice == alone.choice
        assert result.probabilities.keys() == alone.probabilities.keys()
        assert all(abs(result.probabilities[o] - alone.probabilities[o]) < 1e-4
                   for o in alone.probabilities)
    if is_cache_enabled:  # the cache holds level 0's prompt, and only real prefixes
        ids = one_pass.renderer.prompt_ids(chain[0].prompt)
        assert one_pass.cache.lookup(ids).num_tokens == len(ids)
        again = one_pass.choose(chain[1].prompt, chain[1].menu.options)
        assert again.choice == results[1].choice
        assert abs(again.probabilities[again.choice]
                   - results[1].probabilities[again.choice]) < 1e-4


@pytest.mark.model
def test_real_model_plain_run_decides_identically_in_fewer_calls(engine: Any) -> None:
    from stackroute.server.engines.transformers_engine import TransformersEngine

    tree = build_tree(BANK)
    states = {}
    for unwinding in (False, True):
        machine = build_machine(tree, TransformersEngine(loaded=engine.loaded),
                                options=RouterOptions(recovery=None, speculation=DraftSource.OFF,
                                                      unwinding=unwinding,
                                                      max_argument_tokens=16,
                                                      # the 135M model's DONE after the call
                                                      # (0.55) flips to a repeat (0.58)
                                                      # menu-first; this test needs a DONE
                                                      prompt_order=PromptOrder.REQUEST_FIRST),
                                limits=Limits(max_steps=8))
        machine.clock = lambda: 0.0
        state = machine.start("Show my monthly statement", run_id="real",
                              at="accounts/statements")
        states[unwinding] = machine.run(state)
    off, on = states[False], states[True]
    routes_off = [e for e in off.trace if e.kind.value == "route"]
    routes_on = [e for e in on.trace if e.kind.value == "route"]
    assert [e.decision for e in routes_on] == [e.decision for e in routes_off]
    assert [e.kind for e in on.trace] == [e.kind for e in off.trace]
    for a, b in zip(routes_on, routes_off, strict=True):
        assert all(abs(a.probabilities[o] - b.probabilities[o]) < 1e-4
                   for o in b.probabilities)
    kept = sum(1 for e in routes_on if e.detail.get("unwinding", {}).get("level", 0) > 0)
    assert kept >= 1, [e.decision for e in routes_on]  # the model called a leaf, then DONE
    assert off.usage.model_calls - on.usage.model_calls == kept
