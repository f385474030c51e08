"""The routing plan: where a router's menu decisions come from, in order, decided once when the
router is built from its options and what its engine can do.

`EngineRouter.route` walks `RoutingPlan.sources` the way `StackMachine.step` walks a
transition: the first source that decides the menu wins; a source that spent something
without deciding (a verification pass whose levels were too close to trust) hands its cost
on to the next. The plain policy's sources, each only where it can run:

1. `MEMO`: a decision verified ahead (by unwinding or speculation) waiting for this request;
2. `UNWINDING`: after a leaf call, the DONE answers that pop the stack, in one pass;
3. `SPECULATION`: a drafted path down, verified in one pass;
4. `PLAIN`: the model's constrained choice.

The guided policy has one source, `GUIDED` (`guided_step.py`: the scored menu and the
recovery rules), after `ABSTAINED` where the abstention check is on (`abstention.py`: a run
stopped before its first leaf call unwinds with no model call, BACK up to the root and DONE
there, ending with no call; the check itself runs where the leaf is about to be called);
its drafted paths (`prefetches_paths`) are verified into the scorer's memo
under the very bias each level gets, so its decisions are step-by-step guided routing's.

Whether a router needs leaf evidence, drafts paths, or keeps a route cache is decided here
and nowhere else (the router, the pool and `build_router` read the plan).

>>> from stackroute.server.routing.options import RouterOptions
>>> plan = RoutingPlan.build(RouterOptions(recovery=None, speculation=DraftSource.ROUTES),
...                          can_verify_paths=True, can_verify_levels=True)
>>> [s.value for s in plan.sources], plan.uses_route_cache, plan.needs_evidence
(['memo', 'speculation', 'plain'], True, False)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from stackroute.runtime.usage import Usage
from stackroute.server.engines.verification import LevelVerifier, PathVerifier
from stackroute.server.routing.options import DraftSource, Policy, RouterOptions


class StepSource(StrEnum):
    """One place a menu decision can come from."""

    MEMO = "memo"  # verified ahead, waiting for exactly this request
    ABSTAINED = "abstained"  # a run the abstention check stopped: unwind, no model call
    UNWINDING = "unwinding"  # the DONEs that pop the stack after a call, in one pass
    SPECULATION = "speculation"  # a drafted path down, verified in one pass
    GUIDED = "guided"  # the guided policy: scored menu under evidence, recovery rules
    PLAIN = "plain"  # the model's constrained choice alone


@dataclass(frozen=True)
class Passed:
    """A source that spent something (a verification pass whose levels were too close to
    trust) without deciding: its cost and what the trace records go to the decision."""

    usage: Usage
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class RoutingPlan:
    sources: tuple[StepSource, ...]  # tried in order; the last always decides
    policy: Policy
    drafts: DraftSource  # what drafted paths come from; OFF: none (step by step)
    needs_evidence: bool  # a leaf index over the catalog (the prior, the finish rule, drafts)
    uses_route_cache: bool  # drafts from the routes taken for earlier requests
    is_flat: bool

    @property
    def prefetches_paths(self) -> bool:
        """Guided routing verifies drafted paths into its scorer's memo."""
        return self.policy is Policy.GUIDED and self.drafts is not DraftSource.OFF

    @property
    def drafts_from_evidence(self) -> bool:
        return self.drafts in (DraftSource.EVIDENCE, DraftSource.BOTH)

    @classmethod
    def for_engine(cls, options: RouterOptions, engine: object, *,
                   is_flat: bool = False) -> RoutingPlan:
        """The plan for `options` on `engine` (its verification capabilities)."""
        return cls.build(options, can_verify_paths=isinstance(engine, PathVerifier),
                         can_verify_levels=isinstance(engine, LevelVerifier), is_flat=is_flat)

    @classmethod
    def build(cls, options: RouterOptions, *, can_verify_paths: bool, can_verify_levels: bool,
              is_flat: bool = False) -> RoutingPlan:
        recovery = options.recovery
        # One menu holds every leaf in the flat twin: there is no path to draft. An engine
        # that cannot verify paths (vLLM, remote) routes step by step.
        drafts = options.speculation if can_verify_paths and not is_flat else DraftSource.OFF
        if recovery is not None:
            sources: tuple[StepSource, ...] = (StepSource.GUIDED,)
            if options.abstention is not None:
                sources = (StepSource.ABSTAINED, *sources)
        else:
            unwinds = options.unwinding and can_verify_levels
            speculates = drafts is not DraftSource.OFF
            sources = tuple(s for s, on in (
                (StepSource.MEMO, unwinds or speculates), (StepSource.UNWINDING, unwinds),
                (StepSource.SPECULATION, speculates), (StepSource.PLAIN, True)) if on)
        needs_evidence = (recovery is not None and recovery.needs_evidence) or \
            drafts in (DraftSource.EVIDENCE, DraftSource.BOTH)
        return cls(sources=sources, policy=options.policy, drafts=drafts,
                   needs_evidence=needs_evidence,
                   uses_route_cache=drafts in (DraftSource.ROUTES, DraftSource.BOTH),
                   is_flat=is_flat)

    def describe(self) -> dict[str, Any]:
        """The plan as a trace or a test compares it."""
        return {"sources": [s.value for s in self.sources], "policy": self.policy.value,
                "drafts": self.drafts.value, "needs_evidence": self.needs_evidence,
                "uses_route_cache": self.uses_route_cache, "is_flat": self.is_flat}
