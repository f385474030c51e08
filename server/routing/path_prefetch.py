"""Guided routing with speculation: verify a drafted path in one pass, each level under the
very bias guided routing would put there, and keep every level's result where the step-by-step
decision will look for it.

The guided policy's decision at a menu is `engine.choose(prompt, options, option_bias=b)`
followed by rules on the scored menu (backtrack, beam, fallback, finish). The evidence prior
and the neutral contrast are additive on the options' logits, so the engine can apply each
level's `b` to that level's menu trie inside the one verification pass (`PathLevel.
option_bias`). The results go into the `MenuScorer`'s memo under the exact (prompt, options,
bias) key the decision would compute; when the machine reaches that frame, the scorer answers
from the memo and the policy applies its rules to the same numbers. Decisions are those of
step-by-step guided routing by construction: a level the machine does not reach (another
choice, a backtrack) is simply never asked for. As for plain speculation, a level is kept
only while every level above chose its drafted name, and not when its margin is too close to
trust the long pass's rounding.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stackroute.runtime.router import RoutingRequest
from stackroute.runtime.speculation import drafted_requests
from stackroute.runtime.usage import Usage
from stackroute.server.engines.base import ContextOverflowError, MenuResult
from stackroute.server.engines.verification import PathLevel, PathVerifier
from stackroute.server.routing.speculator import (
    DEFAULT_MAX_FAILED_DRAFTS,
    DEFAULT_MAX_LEVELS,
    DraftBudget,
    Drafter,
)
from stackroute.server.routing.verified import kept_levels, trusted_margin

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DraftedPath:
    names: tuple[str, ...]  # from the current node down to a leaf
    requests: list[RoutingRequest]  # the request at each drafted level (the first: now)
    source: str


@dataclass(frozen=True)
class Prefetched:
    """What a verification pass left for the scorer's memo: each kept level's request, the
    bias it was verified under and the engine's result; its cost and trace record."""

    kept: list[tuple[RoutingRequest, Mapping[str, float], MenuResult]]
    usage: Usage
    detail: dict[str, Any]


class PathPrefetcher:
    """Drafts a path and verifies it in one pass; the scorer (`menu_scoring.py`) supplies
    each level's bias and keeps the results. It never calls the scorer."""

    def __init__(self, verifier: PathVerifier, drafter: Drafter, *,
                 min_margin: float | None = None, max_levels: int = DEFAULT_MAX_LEVELS,
                 max_failed_drafts: int = DEFAULT_MAX_FAILED_DRAFTS) -> None:
        """`min_margin` None: the trusted margin for the verifier's precision
        (`verified.trusted_margin`)."""
        self.verifier = verifier
        self.drafter = drafter
        self.min_margin = trusted_margin(verifier) if min_margin is None else min_margin
        self.max_levels = max_levels
        self.budget = DraftBudget(max_failed_drafts)

    def draft(self, request: RoutingRequest) -> DraftedPath | None:
        """A path of two levels or more from `request`'s menu down, unless the run's budget
        of failed drafts is spent."""
        if self.budget.is_spent(request.run_id):
            return None
        draft = self.drafter.draft(request)
        if draft is None or len(draft.names) < 2 or draft.names[0] not in request.menu:
            return None
        names = draft.names[:self.max_levels]
        return DraftedPath(names, drafted_requests(request, names), draft.source)

    def verify(self, request: RoutingRequest, path: DraftedPath,
               biases: Sequence[Mapping[str, float]], usage: Usage) -> Prefetched | None:
        """`path` verified in one pass, each level under its bias in `biases`; `usage` is
        what computing those biases cost. None when nothing was verified and nothing paid."""
        names = path.names
        try:
            results = self.verifier.verify_path([
                PathLevel(r.prompt, r.menu.options, name, option_bias=b or None)
                for r, name, b in zip(path.requests, names, biases, strict=True)])
        except (ValueError, ContextOverflowError) as e:
            log.debug("draft %s not verifiable: %s", "/".join(names), e)
            return None if usage.model_calls == 0 else Prefetched([], usage, {
                "levels": len(names), "accepted": 0, "source": path.source,
                "fallback": "unverifiable"})
        kept = len(kept_levels(results, names, min_margin=self.min_margin))
        if kept < 2:
            self.budget.count_failure(request.run_id)
        accepted = sum(results[k].choice == names[k] for k in range(kept))
        usage = usage + results[0].usage + Usage(speculated_levels=len(names),
                                                 accepted_levels=accepted)
        return Prefetched(list(zip(path.requests[:kept], biases, results, strict=False)),
                          usage, {"levels": len(names), "kept": kept, "accepted": accepted,
                                  "source": path.source})
