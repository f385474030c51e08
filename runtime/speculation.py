"""The routing calls a drafted path would make, predicted without running the machine.

Speculative routing checks a drafted path root → … → leaf in one model pass. For that it needs
the prompt and menu the step-by-step machine would build at every level had the model chosen
the drafted names. Descending into a router is one fixed transition (the answer turn, then
the child's fresh frame with its menu turn), so the requests below the current one follow from
it alone. The machine stays the judge: a router that receives a predicted decision checks that
the request it is asked about is the one predicted (see `matches`), so a limit or anything
else the prediction did not model only costs the speculation, never a wrong decision.

Unwinding is the other direction: after a leaf call, the DONE answers that pop the stack
frame by frame. Those transitions (pop, hand the output up, the parent's next menu) are the
machine's, so each request carries the machine's own prediction of the next one
(`RoutingRequest.after_done`) and `unwinding_requests` follows that chain.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from stackroute.runtime.errors import StateError
from stackroute.runtime.menu import frame_menu
from stackroute.runtime.prompt import answer
from stackroute.runtime.router import RoutingRequest
from stackroute.runtime.tree import Node


def descend(request: RoutingRequest, choice: str) -> RoutingRequest:
    """The request the machine makes next when `request` is answered with router `choice`."""
    child = request.child(choice)
    if child.is_leaf:
        raise StateError(f"{child.path_str!r} is a leaf; only a router opens a frame")
    return replace(opened_child(request, child), after_done=None)


def opened_child(request: RoutingRequest, child: Node) -> RoutingRequest:
    """The fresh frame at router `child` as the machine pushes it from `request`'s menu:
    the answer, then its opening turn (shortlisted where `request.shortlister` says, as
    `StackMachine._push` asks it), a fresh menu with BACK."""
    menu = frame_menu(path=child.path_str, child_names=child.child_names, depth=child.depth,
                      tried=(), has_output=False, shortlist=None)
    shortlist = None if request.shortlister is None else \
        request.shortlister.shortlist(request.task, request.calls, child, menu)
    if shortlist is not None:
        menu = frame_menu(path=child.path_str, child_names=child.child_names,
                          depth=child.depth, tried=(), has_output=False,
                          shortlist=shortlist.children)
    prompt = request.prompt.extend(answer(child.name),
                                   request.layout.opening_turn(child, menu, shortlist))
    return replace(request, step=request.step + 1, depth=request.depth + 1, node=child,
                   menu=menu, prompt=prompt)


def drafted_requests(request: RoutingRequest, draft: Sequence[str]) -> list[RoutingRequest]:
    """The request at every level of `draft` (names from `request.node` down, each a router
    but the last): `request` itself first, then one per router entered."""
    if not draft:
        raise ValueError("a draft names at least one option")
    requests = [request]
    for choice in draft[:-1]:
        requests.append(descend(requests[-1], choice))
    last = requests[-1]
    if draft[-1] not in last.menu:
        raise StateError(f"draft option {draft[-1]!r} is not on the menu at "
                         f"{last.node.path_str or '<root>'}: {list(last.menu.options)}")
    return requests


def unwinding_requests(request: RoutingRequest, *, max_levels: int | None = None,
                       ) -> list[RoutingRequest]:
    """`request`, then the request the machine makes after each DONE above it, as long as
    the machine predicts one (up to the root, whose DONE ends the run; a limit or a menu
    without DONE ends the chain earlier), at most `max_levels` requests in all."""
    requests = [request]
    while max_levels is None or len(requests) < max_levels:
        after_done = requests[-1].after_done
        following = None if after_done is None else after_done()
        if following is None:
            break
        requests.append(following)
    return requests


def matches(predicted: RoutingRequest, actual: RoutingRequest) -> bool:
    """Whether the machine asked exactly what was predicted (same run, step, node, menu and
    prompt), so a decision computed for the prediction is the decision for `actual`."""
    return (predicted.run_id == actual.run_id and predicted.step == actual.step
            and predicted.node.path == actual.node.path and predicted.menu == actual.menu
            and predicted.prompt == actual.prompt)
