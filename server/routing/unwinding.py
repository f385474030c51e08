"""Unwinding in one pass: after a leaf call, the DONE answers that pop the stack are computed
together, and only the decisions step-by-step routing would make are kept.

When a frame below the root offers DONE (it has produced something: a leaf call ran in it
or under it), the machine can say which request it makes if that DONE comes, and the one
after that, up to the root (`RoutingRequest.after_done`, `runtime/speculation.py`). The
engine computes every level's constrained choice in one pass over that prompt tree
(`LevelVerifier`). The decisions kept are exactly those of greedy step-by-step routing:
level 0 always (its context is the real one), and level k + 1 only while levels 0..k all
chose DONE; the first level that chose something else is itself a correct decision (like
the bonus token of speculative decoding). A level whose closest call (`margin`) is under
`min_margin` is not trusted, since one long pass and several short ones can round
differently; routing goes step by step from there.

Kept decisions wait, per run, for the routing calls the machine makes next; each is handed
out only if the machine asks exactly the predicted request (`matches`), so anything the
prediction did not model costs the pass only. A pass that kept fewer than two levels saved
no call and cost the other levels' tokens; after `max_failed_passes` of those in one run,
the run unwinds step by step (a small model that calls the same leaf again instead of
answering DONE would otherwise pay for a wasted pass at every call). Each decision's
`detail["unwinding"]` records its level, the levels computed and whether it chose DONE; the
first level's usage counts the levels computed (`speculated_levels`) and the DONE answers
kept (`accepted_levels`).

Plain policy only: the guided policy decides a menu through `RecoveryPolicy` (the finish
rule answers DONE with no model call, backtracking and the beam may make several calls),
so one precomputed choice per level is not its decision; it routes step by step.
"""

from __future__ import annotations

import logging

from stackroute.runtime.menu import CompletionState
from stackroute.runtime.router import RoutingRequest
from stackroute.runtime.speculation import unwinding_requests
from stackroute.runtime.usage import Usage
from stackroute.server.engines.base import ContextOverflowError, Engine
from stackroute.server.engines.verification import LevelVerifier, MenuLevel
from stackroute.server.routing.plan import Passed
from stackroute.server.routing.recovery import MenuStep
from stackroute.server.routing.speculator import DraftBudget
from stackroute.server.routing.verified import WaitingDecisions, kept_levels, trusted_margin

log = logging.getLogger(__name__)

DEFAULT_MAX_LEVELS = 8
DEFAULT_MAX_FAILED_PASSES = 1  # per run
DONE = CompletionState.DONE.value


class Unwinder:
    """Computes the unwinding DONE decisions of one router in one pass and hands them out."""

    def __init__(self, engine: Engine, *, min_margin: float | None = None,
                 max_levels: int = DEFAULT_MAX_LEVELS,
                 max_failed_passes: int = DEFAULT_MAX_FAILED_PASSES) -> None:
        if max_levels < 2:
            raise ValueError(f"max_levels must be at least 2 to save a call; got {max_levels}")
        self.verifier = engine if isinstance(engine, LevelVerifier) else None
        self.min_margin = trusted_margin(engine) if min_margin is None else min_margin
        self.max_levels = max_levels
        self.budget = DraftBudget(max_failed_passes)  # passes that saved no call, per run
        self.waiting = WaitingDecisions()

    def step(self, request: RoutingRequest) -> MenuStep | Passed | None:
        """The decision at `request` from the unwinding levels computed in one pass (the
        later kept levels wait in `waiting`); `Passed` when the pass kept no level (its cost
        goes to the next source's decision); None when there is nothing to unwind."""
        verifier = self.verifier
        if verifier is None or request.depth < 1 or DONE not in request.menu \
                or self.budget.is_spent(request.run_id):
            return None
        requests = unwinding_requests(request, max_levels=self.max_levels)
        if len(requests) < 2:
            return None
        try:
            results = verifier.verify_levels(
                [MenuLevel(r.prompt, r.menu.options) for r in requests])
        except (ValueError, ContextOverflowError) as e:
            # A level past the context, or a menu that does not compile: step-by-step
            # routing may never ask it, so the prediction must not fail the run.
            log.debug("unwinding from %s not computable: %s", request.node.path_str, e)
            return None
        kept = kept_levels(results, [DONE] * len(results), min_margin=self.min_margin)
        if len(kept) < 2:
            self.budget.count_failure(request.run_id)
        if not kept:  # even level 0 was too close to call from the long pass
            return Passed(results[0].usage, {"unwinding": {
                "levels": len(requests), "accepted": 0, "fallback": "margin"}})
        accepted = sum(r.choice == DONE for r in kept)
        steps = []
        for k, result in enumerate(kept):
            usage = result.usage
            if k == 0:
                usage = usage + Usage(speculated_levels=len(requests), accepted_levels=accepted)
            steps.append(MenuStep(result.choice, result.probabilities, result.margin, usage, {
                "margin": result.margin, "unwinding": {
                    "level": k, "levels": len(requests), "accepted": result.choice == DONE}}))
        self.waiting.put(request.run_id, requests[1:len(steps)], steps[1:])
        return steps[0]
