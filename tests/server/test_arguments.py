"""Leaf arguments (routing/router.py): an answer cut off at the token cap is retried once under
the required properties only, never unchanged, and the fallback is recorded (tier b: a
scripted engine, the real machine)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from recovery_kit import FakeEngine, then_done
from stackroute.runtime.catalog import build_tree
from stackroute.runtime.usage import Usage
from stackroute.server.engines.base import Constraint, Generation, SamplingOptions
from stackroute.server.routing.router import build_machine, required_only
from stackroute.server.tools.evaluate import Query, run_query

SCHEMA = {"type": "object", "properties": {
    "amount": {"type": "number"},
    "note": {"type": "string", "format": "email"}},
    "required": ["amount"]}
CATALOG = {"name": "r", "children": [{"name": "pay", "description": "Pay.",
                                      "parameters": SCHEMA}]}


class RunsOn(FakeEngine):
    """Fills the token cap whenever `note` is allowed; answers at once when it is not."""

    def __init__(self) -> None:
        super().__init__(then_done({"pay": 5.0, "DONE": 0.0}))
        self.schemas: list[Mapping[str, Any]] = []

    def generate(self, prompt: Any, *, constraint: Constraint | None = None,
                 sampling: SamplingOptions | None = None) -> Generation:
        schema = constraint.schema if constraint is not None else None
        assert schema is not None and sampling is not None
        self.schemas.append(schema)
        if "note" in schema["properties"]:
            return Generation(text='{"amount":5,"note":"aaaa', finish_reason="length",
                              usage=Usage(model_calls=1, generated_tokens=sampling.max_tokens))
        return Generation(text='{"amount":5}', finish_reason="stop",
                          usage=Usage(model_calls=1, generated_tokens=6))


def test_a_cut_off_answer_is_retried_under_the_required_properties_once() -> None:
    engine = RunsOn()
    machine = build_machine(build_tree(CATALOG), engine)
    state = run_query(machine, Query(id="q", query="pay 5", gold=(), args=None, tags=()))
    assert [(c["path"], c["arguments"]) for c in state.calls] == [("pay", {"amount": 5})]
    assert len(engine.schemas) == 2  # the cut-off answer, then the narrowed one: no loop
    assert engine.schemas[1] == required_only(SCHEMA)
    leaf = next(e for e in state.trace if e.kind.value == "route" and e.decision == "pay")
    assert leaf.detail["arguments_fallback"] == "required_only"
    assert leaf.usage is not None and leaf.usage["generated_tokens"] == 384 + 6
    assert state.num_format_failures == 0


def test_an_answer_that_ends_is_kept_as_it_is() -> None:
    engine = FakeEngine(then_done({"pay": 5.0, "DONE": 0.0}))
    machine = build_machine(build_tree(CATALOG), engine)
    state = run_query(machine, Query(id="q", query="pay", gold=(), args=None, tags=()))
    leaf = next(e for e in state.trace if e.kind.value == "route" and e.decision == "pay")
    assert "arguments_fallback" not in leaf.detail
    assert json.loads(leaf.detail["arguments_text"]) == {}


def test_required_only_changes_nothing_where_nothing_is_optional() -> None:
    closed = {"type": "object", "properties": {"a": {}}, "required": ["a"],
              "additionalProperties": False}
    assert required_only(closed) is None
    assert required_only({"type": "object"}) is None
    assert required_only({"type": "object", "properties": {"a": {}}}) == {
        "type": "object", "properties": {}, "additionalProperties": False}
