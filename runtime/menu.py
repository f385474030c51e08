"""Menus: what one routing call may answer at a frame."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class CompletionState(StrEnum):
    """The answers every menu may offer besides child names."""

    DONE = "DONE"  # this frame's work is finished: return its output to the parent
    BACK = "BACK"  # wrong branch: return to the parent with nothing


@dataclass(frozen=True)
class Menu:
    """The options of one routing call, in the order the prompt shows them.

    `children` are the child names still offered (a branch the model went BACK from is not
    offered again in the same frame); `states` are the completion states that mean something
    at this frame (see `menu_for` in `machine.py`).
    """

    node_path: str
    children: tuple[str, ...]
    states: tuple[CompletionState, ...]

    @property
    def options(self) -> tuple[str, ...]:
        return self.children + tuple(s.value for s in self.states)

    def __contains__(self, option: str) -> bool:
        return option in self.options
