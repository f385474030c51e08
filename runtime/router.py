"""The router seam: given the current menu, return a decision. The runtime never knows which
engine (or script) is behind it."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from stackroute.runtime.decision import Decision
from stackroute.runtime.frames import RefusedArguments
from stackroute.runtime.menu import Menu, Shortlist
from stackroute.runtime.prompt import Prompt, PromptLayout, answer
from stackroute.runtime.tree import Node


@dataclass(frozen=True)
class RoutingRequest:
    """Everything a router may use for one routing call."""

    run_id: str
    step: int  # routing calls made before this one in the run
    depth: int  # frames on the stack minus one
    task: str
    node: Node
    menu: Menu
    prompt: Prompt
    layout: PromptLayout
    calls: tuple[str, ...] = ()  # paths of the leaf calls the run has made so far, in order
    # Arguments a leaf's schema refused earlier in this frame, oldest first: a router's next
    # answer for that leaf should not be the same call (`arguments/filling.py`).
    refused: tuple[RefusedArguments, ...] = ()
    # The request the machine makes next if this one is answered DONE (None: DONE is not on
    # the menu, it finishes the run, or the next step is no routing call). Only the machine
    # knows that transition, so it supplies this; it is a prediction, not state, so it is
    # not compared (`speculation.matches` judges) and never serialised.
    after_done: Callable[[], RoutingRequest | None] | None = field(
        default=None, compare=False, repr=False)
    # The machine's shortlister, so a predicted descent (`speculation.descend`) opens a child
    # frame shortlisted exactly where the machine will (None: every frame in full).
    shortlister: Shortlister | None = field(default=None, compare=False, repr=False)

    def child(self, name: str) -> Node:
        child = self.node.child(name)
        if child is None:
            raise KeyError(f"{name!r} is not a child of {self.node.path_str or '<root>'}")
        return child

    def arguments_prompt(self, leaf: Node) -> Prompt:
        """The prompt for a chosen leaf's arguments: this call's prompt, the answer, the ask."""
        return self.prompt.extend(answer(leaf.name),
                                  self.layout.arguments_request(leaf, self.task))


class Router(Protocol):
    def route(self, request: RoutingRequest) -> Decision:
        """Pick one menu option; for a leaf, also its arguments."""
        ...


class Shortlister(Protocol):
    """Decides whether a frame opens with a shortlist of its menu (and which options) or with
    the full menu (None); the machine asks once per frame, when it pushes it."""

    def shortlist(self, task: str, calls: tuple[str, ...], node: Node,
                  menu: Menu) -> Shortlist | None: ...


ScriptStep = str | tuple[str, Mapping[str, Any]]


class ScriptedRouter:
    """A router that answers from a script indexed by the run's step number.

    Indexing by step (not by how often it was called) makes a resumed run continue exactly as
    an uninterrupted one would: the script is a pure function of the state.
    """

    def __init__(self, script: Sequence[ScriptStep] | Callable[[RoutingRequest], ScriptStep],
                 ) -> None:
        self.script = script

    def route(self, request: RoutingRequest) -> Decision:
        if callable(self.script):
            step = self.script(request)
        elif request.step < len(self.script):
            step = self.script[request.step]
        else:
            raise IndexError(f"script has no step {request.step}")
        if isinstance(step, tuple):
            choice, arguments = step
            return Decision(choice=choice, arguments=dict(arguments))
        return Decision(choice=step, arguments={} if _is_leaf(request, step) else None)


def _is_leaf(request: RoutingRequest, choice: str) -> bool:
    child = request.node.child(choice)
    return child is not None and child.is_leaf
