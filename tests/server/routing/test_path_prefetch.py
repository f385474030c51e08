"""Guided routing with speculation (routing/path_prefetch.py): every decision identical to
step-by-step guided routing, fewer model calls where the draft is right (tier b: a scripted
engine that verifies paths level by level under each level's bias, the real machine)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from doubles import LogitEngine, then_done
from recovery_kit import evidence_source, house_tree
from stackroute.runtime.state import RunState
from stackroute.server.engines.base import MenuResult
from stackroute.server.engines.verification import PathLevel
from stackroute.server.routing.options import DraftSource, RouterOptions
from stackroute.server.routing.recovery import RecoveryOptions
from stackroute.server.routing.router import build_machine
from stackroute.server.tools.evaluate import Query, run_query

TASKS = ["pay the water bill now", "wire money to a bank abroad", "split the rent",
         "what is the weather in Oslo", "send a gift of money to a friend",
         "pay the electricity bill, then split the rent with a housemate"]
LOGITS = {"billing": 1.0, "transfers": 0.5, "weather": 0.0, "DONE": 0.8, "pay_water": 0.3,
          "pay_power": 0.2, "split_rent": 0.1, "send_gift": 0.4, "abroad": 0.0,
          "wire_abroad": 0.0, "BACK": -0.5}


class VerifyingEngine(LogitEngine):
    """Verifies a path as step-by-step would decide each level (bias included); counts."""

    def __init__(self) -> None:
        super().__init__(then_done(LOGITS))
        self.num_verifications = 0

    def verify_path(self, levels: Sequence[PathLevel]) -> list[MenuResult]:
        self.num_verifications += 1
        results = [self.choose(level.prompt, level.options, option_bias=level.option_bias)
                   for level in levels]
        del self.calls[-len(levels):]  # one pass, not len(levels) routing calls
        return results


def guided(engine: LogitEngine, source: DraftSource) -> Any:
    tree = house_tree()
    options = RouterOptions(recovery=RecoveryOptions(is_contrast_enabled=False),
                            speculation=source)
    return build_machine(tree, engine, options=options, evidence=evidence_source(tree))


def decisions(state: RunState) -> list[tuple[str, str, str | None]]:
    return [(e.kind.value, e.path, e.decision) for e in state.trace
            if e.kind.value in ("route", "push", "pop_done", "pop_back", "leaf_result")]


def run(machine: Any, task: str) -> RunState:
    return run_query(machine, Query(id="q", query=task, gold=(), args=None, tags=()))


@pytest.mark.parametrize("source", [DraftSource.EVIDENCE, DraftSource.ROUTES, DraftSource.BOTH])
def test_guided_speculation_decides_as_step_by_step(source: DraftSource) -> None:
    steps, fast = VerifyingEngine(), VerifyingEngine()
    reference_machine, machine = guided(steps, DraftSource.OFF), guided(fast, source)
    # The second round asks every request again in other words ("please" carries no
    # evidence): the route cache's nearest earlier request drafts the path; an exact repeat
    # would be answered from the scorer's memo without any draft.
    for task in TASKS + [f"please {task}" for task in TASKS]:
        reference, state = run(reference_machine, task), run(machine, task)
        assert decisions(state) == decisions(reference), task
        assert state.calls == reference.calls
    assert steps.num_verifications == 0
    assert fast.num_verifications > 0
    assert len(fast.routing_calls()) < len(steps.routing_calls())


def test_a_right_evidence_draft_costs_one_pass_for_the_whole_descent() -> None:
    engine = VerifyingEngine()
    state = run(guided(engine, DraftSource.EVIDENCE), "wire money to a bank abroad")
    assert [c["path"] for c in state.calls] == ["transfers/abroad/wire_abroad"]
    assert engine.num_verifications == 1 and engine.routing_calls() == []
    first = next(e for e in state.trace if e.kind.value == "route")
    assert first.detail["speculation"] == {"levels": 3, "kept": 3, "accepted": 3,
                                           "source": "evidence"}
    assert state.usage.speculated_levels == 3 and state.usage.accepted_levels == 3
