"""What a routing call did, and how a run the service gives up on is ended: shared by the
route call and the session workers."""

from __future__ import annotations

import time
from enum import StrEnum

from stackroute.runtime.governance import RunStatus
from stackroute.runtime.menu import CompletionState
from stackroute.runtime.state import RunState
from stackroute.runtime.trace import EventKind, TraceEvent
from stackroute.runtime.tree import CapabilityTree


class RouteOutcome(StrEnum):
    """What a routing call's decision did."""

    ROUTER = "router"  # entered a router: the run goes on below
    LEAF = "leaf"  # chose a leaf (its call is pending, or its arguments were a misstep)
    DONE = "done"
    BACK = "back"
    MISSTEP = "misstep"  # an answer outside the menu


def routing_outcome(tree: CapabilityTree, event: TraceEvent) -> RouteOutcome:
    """What a routing call's decision did."""
    if event.decision == CompletionState.DONE:
        return RouteOutcome.DONE
    if event.decision == CompletionState.BACK:
        return RouteOutcome.BACK
    node = tree.get(event.path)
    child = None if node is None else node.child(event.decision or "")
    if child is None:
        return RouteOutcome.MISSTEP
    return RouteOutcome.LEAF if child.is_leaf else RouteOutcome.ROUTER


def fail_run(state: RunState, message: str) -> None:
    """End a run with an error, recorded as its last trace event."""
    state.status = RunStatus.ERROR
    state.error = message
    state.pending = None
    top = state.stack[-1] if state.stack else None
    state.trace.append(TraceEvent(
        seq=len(state.trace), kind=EventKind.FINISH,
        frame_id=None if top is None else top.frame_id,
        parent_id=None if top is None else top.parent_id,
        path="" if top is None else top.node_path, depth=max(len(state.stack) - 1, 0),
        error=message, detail={"status": RunStatus.ERROR.value}, time_unix=time.time()))
