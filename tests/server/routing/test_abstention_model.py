"""The abstention check with the real embedded model and its shipped calibration: a chit-chat
request gets no call, a clear in-scope request still gets its call."""

from __future__ import annotations

from typing import Any

import pytest
from stackroute.bench.workloads.generate import generate_suite
from stackroute.runtime.catalog import build_tree
from stackroute.server.routing.calibration import router_options
from stackroute.server.routing.router import build_machine
from stackroute.server.tools.evaluate import Query, run_query

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def household() -> Any:
    """The semantic-overlap-32 catalog of the report seed (the out-of-scope suite's test
    split routes chit-chat against it)."""
    return build_tree(generate_suite("semantic-overlap", num_leaves=32, seed=0).catalog)


def calls(machine: Any, task: str) -> list[str]:
    state = run_query(machine, Query(id=task[:8], query=task, gold=(), args=None, tags=()))
    return [c["path"] for c in state.calls]


def test_chit_chat_gets_no_call_and_a_clear_request_its_call(engine: Any,
                                                             household: Any) -> None:
    options = router_options(engine.info.model, abstain=True)
    if options.abstention is None:
        pytest.fail(f"the calibration shipped for {engine.info.model} has no abstention "
                    "check (stackroute bench out-of-scope --split dev --fit)")
    with_check = build_machine(household, engine, options=options)
    assert calls(with_check, "Haha, that made my day.") == []
    assert calls(with_check, "What is the weather in Oslo this weekend?") == []
    clear = next(q for q in generate_suite("semantic-overlap", num_leaves=32, seed=0).queries
                 if q["gold"] and "clear" in q["tags"])
    assert calls(with_check, clear["query"]) == clear["gold"]
