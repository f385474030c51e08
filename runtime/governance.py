"""Governance: the limits every run obeys, and the typed outcomes of a run."""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass, fields
from enum import StrEnum
from typing import Any

from stackroute.runtime.errors import InputError


class RunStatus(StrEnum):
    RUNNING = "running"
    PAUSED = "paused"  # waiting at a confirmation gate, or for values the request lacked
    DONE = "done"  # the root frame finished
    LIMIT = "limit"  # a governance limit ended the run
    ERROR = "error"
    CANCELLED = "cancelled"

    @property
    def is_final(self) -> bool:
        return self not in (RunStatus.RUNNING, RunStatus.PAUSED)


class LimitKind(StrEnum):
    MAX_STEPS = "max_steps"
    MAX_ITERATIONS = "max_iterations"
    MAX_DEPTH = "max_depth"


@dataclass(frozen=True, kw_only=True)
class Limits:
    """Per-run limits. Frozen, keyword-only; unknown keys are an error in `from_dict`."""

    max_steps: int = 32  # routing calls in the whole run
    max_iterations: int = 6  # routing calls within one frame
    max_depth: int = 8  # frames on the stack
    max_branch_switches: int = 3  # alternations between sibling branches before an alert
    exclude_tried: bool = True  # a branch left with BACK is not offered again in that frame
    max_result_chars: int = 2000  # tool output shown in the prompt is cut here

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type == "int" and (not isinstance(value, int) or value < 1):
                raise InputError(f"limit {f.name} must be a positive integer, got {value!r}")

    def reached(self, *, num_steps: int, num_iterations: int) -> LimitKind | None:
        """The limit that stops the next routing call of a run that made `num_steps` of them,
        `num_iterations` in its top frame, if any (max_steps first)."""
        if num_steps >= self.max_steps:
            return LimitKind.MAX_STEPS
        if num_iterations >= self.max_iterations:
            return LimitKind.MAX_ITERATIONS
        return None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Limits:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise InputError(f"unknown limit(s) {unknown}; known: {sorted(known)}")
        return cls(**data)


def count_branch_switches(history: list[str], routers: set[str]) -> int:
    """How often consecutive delegations in one frame went to a different sibling router."""
    visits = [h for h in history if h in routers]
    return sum(1 for a, b in itertools.pairwise(visits) if a != b)
