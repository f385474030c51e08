"""Options read from a file's JSON object (a calibration's `options`, its `abstention`): the
dataclass whose fields the object's keys must all be, so a misspelt key is an error that names
the known ones rather than a setting silently left at its default.

>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class Knobs:
...     weight: float = 1.0
>>> from_known_fields(Knobs, {"weight": 2.0}, what="knob")
Knobs(weight=2.0)
>>> from_known_fields(Knobs, {"wieght": 2.0}, what="knob")
Traceback (most recent call last):
...
stackroute.runtime.errors.InputError: unknown knob(s) ['wieght']; known: ['weight']
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import TYPE_CHECKING, Any, TypeVar

from stackroute.runtime.errors import InputError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")


def from_known_fields(cls: type[T], data: Mapping[str, Any], *, what: str) -> T:
    """`cls(**data)`, or an `InputError` naming the keys of `data` that are not fields of
    `cls` (`what`: the kind of key, for the message)."""
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise InputError(f"unknown {what}(s) {unknown}; known: {sorted(known)}")
    return cls(**data)
