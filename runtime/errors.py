"""One error hierarchy: our bug vs the model's misstep vs the user's bad input.

`InputError` and its subclasses are the user's bad input: they say what was expected and what
arrived, and the service maps them to a 4xx with the same words. A model misstep is not an
exception at all: it is recorded on the frame (see `trace.EventKind.MISSTEP`). Anything else
that raises is our bug.
"""

from __future__ import annotations

from dataclasses import dataclass


class StackrouteError(Exception):
    """Base class of every error stackroute raises on purpose."""

    code: str = "error"


class InputError(StackrouteError):
    """Bad input from the user: a 4xx, with a message naming what was wrong."""

    code = "invalid_input"


@dataclass(frozen=True)
class Problem:
    """One validation problem, located by node path (`""` is the root)."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path or '<root>'}: {self.message}"


class CatalogError(InputError):
    """A catalog failed validation; it carries every problem found, not just the first."""

    code = "invalid_catalog"

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        head = "; ".join(str(p) for p in problems[:5])
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        super().__init__(f"catalog has {len(problems)} problem(s): {head}{more}")


class ArgumentsError(InputError):
    """Leaf arguments that do not validate against the leaf's schema."""

    code = "invalid_arguments"


class StateError(InputError):
    """An operation that the run's current state does not allow (e.g. approve when not paused)."""

    code = "invalid_state"


class HandlerError(InputError):
    """A handler reference that cannot be resolved or is not allowed."""

    code = "invalid_handler"
