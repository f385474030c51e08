"""Who picks argument values among the request's candidates (`ArgumentValues`): the model's
constrained choice, or the candidates' priors alone with no model call; chosen per model by
its calibration file (guided policy), overridden by the `argument_values` setting and
`--argument-values` (any policy)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from doubles import LogitEngine, then_done
from stackroute.runtime.catalog import build_tree
from stackroute.runtime.errors import InputError
from stackroute.server.commands.common import RoutingFlags
from stackroute.server.routing.calibration import read_argument_values, router_options
from stackroute.server.routing.options import (
    ArgumentValues,
    DraftSource,
    Policy,
    RouterOptions,
)
from stackroute.server.routing.router import build_machine
from stackroute.server.settings import ServerSettings
from stackroute.server.tools.evaluate import Query, run_query

SEND = {"name": "r", "children": [{"name": "send", "description": "Send money.",
    "parameters": {"type": "object", "properties": {
        "payee": {"type": "string"},
        "amount": {"type": "number"},
        "memo": {"type": "string"}},
        "required": ["payee", "amount"]}}]}
REQUEST = "Send 40 euros to Asha and 10 to Li"


def run(values: ArgumentValues, engine: LogitEngine) -> Any:
    options = RouterOptions(recovery=None, speculation=DraftSource.OFF, argument_values=values)
    machine = build_machine(build_tree(SEND), engine, options=options)
    return run_query(machine, Query(id="q", query=REQUEST, gold=(), args=None, tags=()))


def value_calls(engine: LogitEngine) -> list[tuple[str, ...]]:
    return [c.options for c in engine.calls if "DONE" not in c.options]


def leaf_detail(state: Any) -> Any:
    return next(e for e in state.trace if e.kind.value == "route" and e.decision == "send")


def test_priors_take_the_top_candidate_with_no_model_call() -> None:
    # The model would pick "Li" for the payee and "10" for the amount; the priors do not.
    contrary = LogitEngine(then_done({"send": 5.0, "DONE": 0.0, "Li": 40.0, "10": 40.0}))
    by_model = run(ArgumentValues.MODEL, contrary)
    assert by_model.calls[0]["arguments"] == {"payee": "Li", "amount": 10}
    payee_options = value_calls(contrary)[0]
    bias = next(c.bias for c in contrary.calls if c.options == payee_options)
    assert bias is not None and max(bias, key=lambda o: bias[o]) == "Asha"

    engine = LogitEngine(then_done({"send": 5.0, "DONE": 0.0, "Li": 40.0, "10": 40.0}))
    state = run(ArgumentValues.PRIORS, engine)
    assert state.calls[0]["arguments"] == {"payee": "Asha", "amount": 40}
    assert value_calls(engine) == []  # only the menu choices reached the engine
    event = leaf_detail(state)
    assert event.arguments_call.usage.model_calls == 0
    sources = {c["name"]: c["source"] for c in event.detail["value_choices"]}
    assert sources["payee"] == "prior" and sources["amount"] == "prior"
    assert sources["memo"] == "unsupported"  # an optional value still needs the request's word


def test_the_calibration_chooses_and_the_flag_overrides(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    body: dict[str, Any] = {"model": "m", "options": {}, "measured": {}}
    path.write_text(json.dumps(body), encoding="utf-8")
    assert read_argument_values(path) is None
    assert router_options("m", calibration=path).argument_values is ArgumentValues.MODEL
    path.write_text(json.dumps({**body, "arguments": {"values": "priors"}}), encoding="utf-8")
    options = router_options("m", calibration=path)
    assert options.argument_values is ArgumentValues.PRIORS
    assert options.describe()["argument_values"] == "priors"
    overridden = router_options("m", calibration=path, argument_values=ArgumentValues.MODEL)
    assert overridden.argument_values is ArgumentValues.MODEL
    assert "argument_values" not in overridden.describe()
    plain = router_options("m", calibration=path, policy=Policy.PLAIN)
    assert plain.argument_values is ArgumentValues.MODEL  # plain: the model alone, the paper's
    plain = router_options("m", policy=Policy.PLAIN, argument_values=ArgumentValues.PRIORS)
    assert plain.argument_values is ArgumentValues.PRIORS
    settings = ServerSettings(argument_values=ArgumentValues.MODEL, calibration=path)
    assert settings.router_options("m").argument_values is ArgumentValues.MODEL


def test_a_bad_value_names_what_was_expected(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"model": "m", "options": {}, "arguments": {"values": "vote"}}),
                    encoding="utf-8")
    with pytest.raises(InputError, match=r"'arguments.values' must be one of model, priors, "
                                         r"got 'vote'"):
        router_options("m", calibration=path)
    with pytest.raises(InputError, match="--argument-values"):
        RoutingFlags.parse(policy=None, calibration=None, argument_values="vote")
    flags = RoutingFlags.parse(policy=None, calibration=None, argument_values="priors")
    assert flags.argument_values is ArgumentValues.PRIORS
