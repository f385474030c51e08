"""One section of a calibration file (`calibrations/<model>.json`): the file read once as JSON,
a clear error where it is not, the section or None. calibration.py reads `options` and
`arguments`, abstention.py its `abstention`; each checks its own section's shape."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from stackroute.runtime.errors import InputError


def read_section(path: Path, key: str) -> Any:
    """`key`'s value in the calibration file at `path` (None where the file has no `key`)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise InputError(f"{path}: expected a calibration file (JSON): {e}") from e
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a calibration file (a JSON object, its '{key}' "
                         f"read), got {type(data).__name__}")
    return data.get(key)
