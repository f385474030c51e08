"""Calibrated scoring: how much the request raises each option's likelihood.

A small model's raw menu distribution carries a strong request-independent preference (for
the first option, for a short name, for `DONE`). Scoring by `log p(o | request) -
strength * log p(o | neutral request)` removes it: the neutral prompt is the same frame, on
the same path, with the request replaced by a content-free one. It depends only on the node
and the options shown, so it costs one model call per distinct menu, ever, not per request.
The correction enters the choice as an additive bias, like the evidence prior. It applies
to a frame's first call only (`needs_contrast`): after a result or a BACK the real prompt is
no longer the neutral one's counterpart, and a request-independent taste for DONE is then
exactly what should be kept (it ends a finished task). A shortlisted frame's first call gets
it when it shows several options: the evidence put them above the rest, not one above the
others, so the model's taste must not decide between them; a single shown option is what the
evidence is sure of, and its frame is spared the call.
"""

from __future__ import annotations

import math

from stackroute.runtime.menu import Shortlist
from stackroute.runtime.messages import Message
from stackroute.runtime.prompt import Prompt, answer
from stackroute.runtime.router import RoutingRequest
from stackroute.runtime.usage import Usage
from stackroute.server.engines.base import Engine
from stackroute.server.routing.lru import Lru

NEUTRAL_REQUEST = "N/A"
_FLOOR_LOGPROB = -30.0  # an option the neutral prompt all but rules out: no huge boost


class NeutralContrast:
    """`-strength * log p(option | neutral prompt)` per option, one engine call per menu."""

    def __init__(self, engine: Engine, *, strength: float = 1.0,
                 max_entries: int = 4096) -> None:
        self.engine = engine
        self.strength = strength
        self.max_entries = max_entries
        self._logprobs: Lru[tuple[str, tuple[str, ...]], dict[str, float]] = \
            Lru(max_entries=max_entries)

    def bias(self, request: RoutingRequest) -> tuple[dict[str, float], Usage]:
        """The correction for `request`'s menu, and what computing it cost (nothing when the
        menu was seen before)."""
        key = (request.node.path_str, request.menu.options)
        logprobs = self._logprobs.get(key)
        usage = Usage()
        if logprobs is None:
            result = self.engine.choose(neutral_prompt(request), request.menu.options)
            logprobs = {o: max(_FLOOR_LOGPROB, math.log(max(p, 1e-300)))
                        for o, p in result.probabilities.items()}
            usage = result.usage
            self._logprobs.put(key, logprobs)
        return {o: -self.strength * lp for o, lp in logprobs.items()}, usage


def is_fresh(request: RoutingRequest) -> bool:
    """Whether this is the frame's first routing call (its prompt ends with its menu turn)."""
    node = request.node
    opening = request.layout.menu_turn(node, request=request.task if node.depth == 0 else None)
    return bool(request.prompt.messages) and request.prompt.messages[-1] == opening


def needs_contrast(request: RoutingRequest) -> bool:
    """Whether `request` is scored with the neutral contrast: a frame's first call on its
    full menu, or on a shortlist of more than one option."""
    return is_fresh(request) or (len(request.menu.children) > 1 and _opens_shortlisted(request))


def is_opening(request: RoutingRequest) -> bool:
    """Whether this is the frame's first routing call, its menu full (`is_fresh`) or
    shortlisted (its prompt ends with the shortlist turn the frame opened with)."""
    return is_fresh(request) or _opens_shortlisted(request)


def _shown(request: RoutingRequest) -> Shortlist | None:
    """The shortlist `request`'s menu shows (None: the full menu)."""
    menu = request.menu
    return Shortlist(children=menu.children, margin=0.0) \
        if menu.is_shortlisted and menu.children else None


def _opens_shortlisted(request: RoutingRequest) -> bool:
    shown, node = _shown(request), request.node
    if shown is None or not request.prompt.messages:
        return False
    opening = request.layout.shortlist_turn(
        node, shown, request.menu, request=request.task if node.depth == 0 else None)
    return request.prompt.messages[-1] == opening


def neutral_prompt(request: RoutingRequest) -> Prompt:
    """The fresh frame at `request.node`, reached along its path, for a content-free request
    (ending with the same shortlisted turn where the request's frame opened shortlisted).

    The header is whatever precedes the root frame's first turn in the real prompt, so the
    two prompts differ only in the request and in the history of this run.
    """
    layout = request.layout
    root = layout.tree.root
    real_root_turn = layout.menu_turn(root, request=request.task)
    messages = request.prompt.messages
    header = messages[:messages.index(real_root_turn)] if real_root_turn in messages \
        else messages[:1]
    menu = request.menu
    shortlist = None if is_fresh(request) else _shown(request)
    turns: list[Message] = []
    node = root
    for name in ("", *request.node.path):
        if name:
            child = node.child(name)
            if child is None:  # the request's node is in this tree: anything else is our bug
                raise RuntimeError(f"{name!r} is not a child of {node.path_str or '<root>'}")
            turns.append(answer(name))
            node = child
        neutral = NEUTRAL_REQUEST if node.depth == 0 else None
        is_last = node.depth == request.node.depth
        turns.append(layout.shortlist_turn(node, shortlist, menu, request=neutral)
                     if is_last and shortlist is not None
                     else layout.menu_turn(node, request=neutral))
    return Prompt(tuple(header) + tuple(turns))
