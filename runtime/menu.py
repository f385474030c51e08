"""Menus: what one routing call may answer at a frame."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class CompletionState(StrEnum):
    """The answers every menu may offer besides child names."""

    DONE = "DONE"  # this frame's work is finished: return its output to the parent
    BACK = "BACK"  # wrong branch: return to the parent with nothing
    # Only on a shortlisted menu: none of the options shown; open this frame's full menu.
    OTHER = "OTHER"


@dataclass(frozen=True)
class Menu:
    """The options of one routing call, in the order the prompt shows them.

    `children` are the child names still offered (a branch the model went BACK from is not
    offered again in the same frame); `states` are the completion states that mean something
    at this frame (see `frame_menu`).
    """

    node_path: str
    children: tuple[str, ...]
    states: tuple[CompletionState, ...]

    @property
    def options(self) -> tuple[str, ...]:
        return self.children + tuple(s.value for s in self.states)

    @property
    def is_shortlisted(self) -> bool:
        return CompletionState.OTHER in self.states

    def __contains__(self, option: str) -> bool:
        return option in self.options


@dataclass(frozen=True)
class Shortlist:
    """The options a frame's opening turn shows instead of its full menu, best first (a
    router's `Shortlister` decides them from its evidence); `OTHER` opens the full menu.
    `margin`: how far the evidence put the last shown option above the first hidden one."""

    children: tuple[str, ...]
    margin: float

    def __post_init__(self) -> None:
        if not self.children:
            raise ValueError("a shortlist shows at least one option")


def frame_menu(*, path: str, child_names: tuple[str, ...], depth: int, tried: tuple[str, ...],
               has_output: bool, shortlist: tuple[str, ...] | None) -> Menu:
    """Children not yet abandoned here (only those shown while the frame is shortlisted),
    then the completion states that mean something.

    The root has no parent to go BACK to; its DONE means "all done" or "nothing applies".
    Elsewhere BACK is offered until the frame has produced something, DONE once it has
    (small models over-pick completion states, so never offer a meaningless one). A
    shortlisted frame also offers OTHER (its full menu) first among the states.
    """
    shown = child_names if shortlist is None else tuple(c for c in child_names
                                                         if c in shortlist)
    children = tuple(n for n in shown if n not in tried)
    if depth == 0 or has_output:
        states: tuple[CompletionState, ...] = (CompletionState.DONE,)
    else:
        states = (CompletionState.BACK,)
    if shortlist is not None:
        states = (CompletionState.OTHER, *states)
    return Menu(node_path=path, children=children, states=states)
