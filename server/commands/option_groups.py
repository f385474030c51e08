"""Option groups: flags several commands share, declared once.

A group is a function whose parameters are typer options and whose result is the typed value a
command works with: `engine_choice` -> `EngineChoice` (which engine and model, and how it
decodes), `routing_flags` -> `RoutingFlags` (the router's options). A command names the value's
type on one of its keyword-only parameters and is wrapped with `with_option_groups`: typer
then sees the group's flags in that parameter's place, and the command gets the built value.
A flag is added to every command that builds an engine or a router by adding it to its group
here, once. A bad value is the clear error (exit 2) a command's own flags give."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from stackroute.grammars.string_caps import DEFAULT_MAX_STRING_CHARS
from stackroute.runtime.errors import StackrouteError
from stackroute.server.commands.common import (
    AbstainOpt,
    ArgumentValuesOpt,
    BaseUrlOpt,
    CalibrationOpt,
    ChatTemplateOpt,
    DraftTokensOpt,
    DtypeOpt,
    EngineArgOpt,
    EngineFlags,
    EngineOpt,
    MissingValuesOpt,
    ModelOpt,
    NoSpecOpt,
    OptionalValuesOpt,
    PolicyOpt,
    PromptOrderOpt,
    RecallOpt,
    RemoteConstraintsOpt,
    RoutingFlags,
    ServedModelNameOpt,
    ShorthandOpt,
    ShortlistMarginOpt,
    ShortlistOpt,
    SpecOpt,
    StringCharsOpt,
    UnwindOpt,
    fail,
    make_engine,
)
from stackroute.server.engines.cpu_dtype import DEFAULT_DTYPE
from stackroute.server.engines.prompt_lookup import DEFAULT_MAX_DRAFT_TOKENS

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class EngineChoice:
    """`--engine`, `--model`, `--base-url` and the engine's decoding flags."""

    engine: str = "transformers"
    model: str | None = None
    base_url: str | None = None
    flags: EngineFlags = field(default_factory=EngineFlags)

    def make(self) -> Any:
        """The engine (loading the model): an `InputError` for a flag the engine lacks."""
        return make_engine(self.engine, self.model, self.base_url, self.flags)


def engine_choice(
    engine: EngineOpt = "transformers", model: ModelOpt = None, base_url: BaseUrlOpt = None,
    dtype: DtypeOpt = DEFAULT_DTYPE, max_draft_tokens: DraftTokensOpt = DEFAULT_MAX_DRAFT_TOKENS,
    max_string_chars: StringCharsOpt = DEFAULT_MAX_STRING_CHARS,
    chat_template: ChatTemplateOpt = None, engine_arg: EngineArgOpt = None,
    served_model_name: ServedModelNameOpt = None,
    remote_constraints: RemoteConstraintsOpt = "auto",
) -> EngineChoice:
    return EngineChoice(engine, model, base_url, EngineFlags(
        dtype, max_draft_tokens, max_string_chars, chat_template=chat_template,
        engine_args=tuple(engine_arg or ()), served_model_name=served_model_name,
        remote_constraints=remote_constraints))


def routing_flags(
    policy: PolicyOpt = None, calibration: CalibrationOpt = None,
    speculation: SpecOpt = None, no_speculation: NoSpecOpt = False,
    unwinding: UnwindOpt = None, prompt_order: PromptOrderOpt = None,
    shortlist: ShortlistOpt = None, shortlist_margin: ShortlistMarginOpt = None,
    abstain: AbstainOpt = None, argument_values: ArgumentValuesOpt = None,
    missing_values: MissingValuesOpt = None, optional_values: OptionalValuesOpt = None,
    recall_after_backs: RecallOpt = None, shorthand: ShorthandOpt = None,
) -> RoutingFlags:
    return RoutingFlags.parse(
        policy=policy, calibration=calibration, speculation=speculation,
        no_speculation=no_speculation, unwinding=unwinding, prompt_order=prompt_order,
        shortlist=shortlist, shortlist_margin=shortlist_margin, abstain=abstain,
        argument_values=argument_values, missing_values=missing_values,
        optional_values=optional_values, recall_after_backs=recall_after_backs,
        shorthand=shorthand)


GROUPS: Mapping[type, Callable[..., Any]] = {EngineChoice: engine_choice,
                                             RoutingFlags: routing_flags}


def with_option_groups(command: F) -> F:
    """`command` with each parameter typed by a group's value replaced, in the signature typer
    reads, by that group's flags; the value is built from them before `command` runs."""
    signature = inspect.signature(command, eval_str=True)
    parameters: list[inspect.Parameter] = []
    groups: dict[str, tuple[Callable[..., Any], tuple[str, ...]]] = {}
    for parameter in signature.parameters.values():
        build = GROUPS.get(parameter.annotation)
        if build is None:
            parameters.append(parameter)
            continue
        flags = tuple(p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
                      for p in inspect.signature(build, eval_str=True).parameters.values())
        groups[parameter.name] = (build, tuple(p.name for p in flags))
        parameters.extend(flags)
    names = [p.name for p in parameters]
    clashes = sorted({n for n in names if names.count(n) > 1})
    if clashes:
        raise TypeError(f"{command.__name__}: parameters {clashes} are also in an option group")

    @functools.wraps(command)
    def run(**given: Any) -> Any:
        try:
            for name, (build, flag_names) in groups.items():
                given[name] = build(**{n: given.pop(n) for n in flag_names})
        except StackrouteError as e:
            raise fail(e) from e
        return command(**given)

    del run.__wrapped__  # typer reads `__signature__`, not the command's own parameters
    run.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in parameters}
    return run  # type: ignore[return-value]
