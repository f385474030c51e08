"""A router's answer to one menu."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from stackroute.runtime.usage import Usage


@dataclass(frozen=True, kw_only=True)
class Decision:
    """One menu entry, and for a leaf its arguments.

    `probabilities` is the router's distribution over the whole menu when it has one (engines
    with constrained choice always do). `raw_text` holds what an unconstrained router produced,
    so a format failure (an answer outside the menu) can be recorded as the model's misstep.
    """

    choice: str
    arguments: Mapping[str, Any] | None = None
    probabilities: Mapping[str, float] | None = None
    margin: float | None = None  # log-prob gap between the top two options, for near ties
    usage: Usage = field(default_factory=Usage)
    raw_text: str | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)
