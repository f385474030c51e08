"""A calibration file (`calibrations/<model>.json`) read once: the JSON object, a clear error
where it is not one, and its sections by name. calibration.py reads `options` and `arguments`,
abstention.py its `abstention`; each checks its own section's shape."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stackroute.runtime.errors import InputError


@dataclass(frozen=True)
class CalibrationFile:
    path: Path
    sections: Mapping[str, Any]

    @classmethod
    def read(cls, path: Path) -> CalibrationFile:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise InputError(f"{path}: expected a calibration file (JSON): {e}") from e
        if not isinstance(data, dict):
            raise InputError(f"{path}: expected a calibration file (a JSON object), got "
                             f"{type(data).__name__}")
        return cls(path, data)

    def section(self, key: str) -> Any:
        """`key`'s value (None where the file has no `key`)."""
        return self.sections.get(key)
