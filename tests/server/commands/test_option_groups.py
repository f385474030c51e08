"""Option groups: the flags several commands share are declared once and reach each command
as one typed value."""

from __future__ import annotations

import inspect

import pytest
import typer
from stackroute.server.cli import app
from stackroute.server.commands.common import JsonOpt, RoutingFlags
from stackroute.server.commands.option_groups import (
    EngineChoice,
    engine_choice,
    routing_flags,
    with_option_groups,
)
from stackroute.server.routing.options import ArgumentValues, DraftSource, Policy
from typer.testing import CliRunner


def group_flags(group) -> set[str]:
    return {p.name for p in inspect.signature(group).parameters.values()}


def command_params(name: str) -> set[str]:
    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    return {p.name for p in commands[name].params if p.name is not None}


@pytest.mark.parametrize("name", ["run", "eval", "route", "calibrate", "lint", "build-tree"])
def test_every_command_that_builds_an_engine_takes_the_same_engine_flags(name: str) -> None:
    assert group_flags(engine_choice) <= command_params(name)


@pytest.mark.parametrize("name", ["run", "eval", "route"])
def test_every_command_that_routes_takes_the_same_routing_flags(name: str) -> None:
    assert group_flags(routing_flags) <= command_params(name)


def probe_app() -> tuple[typer.Typer, list[tuple[EngineChoice, RoutingFlags, bool]]]:
    seen: list[tuple[EngineChoice, RoutingFlags, bool]] = []

    @with_option_groups
    def probe(query: str, *, engine: EngineChoice, routing: RoutingFlags,
              as_json: JsonOpt = False) -> None:
        seen.append((engine, routing, as_json))

    probe_app = typer.Typer()
    probe_app.command()(probe)
    probe_app.command("other")(lambda: None)  # two commands: `probe` is a subcommand
    return probe_app, seen


def test_a_command_gets_the_values_its_groups_build() -> None:
    cli, seen = probe_app()
    result = CliRunner().invoke(cli, [
        "probe", "hello", "--model", "m.gguf", "--dtype", "float32", "--engine-arg", "a=1",
        "--policy", "plain", "--speculation", "evidence", "--argument-values", "priors",
        "--recall-after-backs", "0", "--json"])
    assert result.exit_code == 0, result.output
    [(engine, routing, as_json)] = seen
    assert (engine.engine, engine.model, engine.base_url) == ("transformers", "m.gguf", None)
    assert (engine.flags.dtype, engine.flags.engine_args) == ("float32", ("a=1",))
    assert routing.policy is Policy.PLAIN
    assert routing.speculation is DraftSource.EVIDENCE
    assert routing.argument_values is ArgumentValues.PRIORS
    assert routing.recall_after_backs == 0
    assert as_json is True


def test_defaults_are_the_groups_own() -> None:
    cli, seen = probe_app()
    assert CliRunner().invoke(cli, ["probe", "hi"]).exit_code == 0
    [(engine, routing, _)] = seen
    assert engine == engine_choice()
    assert routing == routing_flags()


def test_a_bad_group_value_is_a_clear_error_and_the_command_does_not_run() -> None:
    cli, seen = probe_app()
    result = CliRunner().invoke(cli, ["probe", "hi", "--policy", "smart"])
    assert result.exit_code == 2
    assert "--policy must be one of plain, guided; got 'smart'" in result.output
    assert seen == []


def test_a_parameter_named_like_a_group_flag_is_refused_when_the_command_is_declared() -> None:
    def clash(model: str = "", *, engine: EngineChoice) -> None:
        pass

    with pytest.raises(TypeError, match=r"clash: parameters \['model'\]"):
        with_option_groups(clash)
