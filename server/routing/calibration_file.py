"""A calibration file (`calibrations/<model>.json`) read once: the JSON object, a clear error
where it is not one, and its sections by name. calibration.py reads `options`, `arguments` and
`speculation`, abstention.py its `abstention`; each checks its own section's shape (`choice`:
a value of one of the enums the options take)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

from stackroute.runtime.errors import InputError

E = TypeVar("E", bound=Enum)


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

    def choice(self, section: str, key: str, kind: type[E]) -> E | None:
        """`section.key` as one of `kind`'s values (None where the file has no `section`, or
        the section no `key`); any other value is an `InputError` naming the values it takes."""
        body = self.section(section)
        if body is None or (isinstance(body, dict) and key not in body):
            return None
        value = body.get(key) if isinstance(body, dict) else None
        try:
            return kind(str(value))
        except ValueError as e:
            allowed = ", ".join(str(v.value) for v in kind)
            raise InputError(f"{self.path}: '{section}.{key}' must be one of {allowed}, "
                             f"got {value!r}") from e

    def number(self, section: str, key: str) -> float | None:
        """`section.key` as a number (None where the file has no `section`, or the section no
        `key`); anything else is an `InputError`."""
        body = self.section(section)
        if body is None or (isinstance(body, dict) and key not in body):
            return None
        value = body.get(key) if isinstance(body, dict) else None
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise InputError(f"{self.path}: '{section}.{key}' must be a number, got {value!r}")
        return float(value)
