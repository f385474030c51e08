"""Routing that can change its mind: backtracking, a beam over branches, a global fallback.

Every decision starts as one scored menu (`scoring.py`: the model's constrained choice under
the evidence prior and, optionally, the neutral contrast). Then, in this order:
1. **plan**: a frame entered on a plan (made by the beam or the fallback one level up) takes
   the planned hop: no new search, and for a beam plan the memoised call answers for free;
2. **backtrack**: in a fresh inner frame, answer `BACK` when the model's best option is below
   `min_confidence` or the evidence puts a better leaf outside this subtree by more than
   `backtrack_gap`; the runtime then drops this branch from the parent's menu, so the parent
   picks the next-best sibling. Each `BACK` shrinks a menu, and governance limits bound it all.
   The converse too: the model's own `BACK` is overruled (best child instead) when this
   subtree holds the best leaf by more than `backtrack_gap`;
3. **beam**: when the two best children are within `beam_margin` nats, explore the best
   `beam_width` of them by greedy descent on the prompts the run would send (the shared prefix
   is cached), score each reached leaf by its path's log-probability, take the best, and keep
   the path as the plan;
4. **fallback**: `DONE` at the root before any call, while the evidence has a leaf at or above
   `fallback_min_score` under a child still on the menu, routes to that leaf (a plan, no calls).
Before all of these, **finish** (`finish.py`): once the run's calls cover what the request
asks, every frame answers `DONE` without a model call; then **recall**: in a frame the model
has already left `recall_after_backs` branches of with `BACK` (a full menu), the evidence
decides with no model call: its best remaining leaf under the menu's children (a plan; when
it scores at least `fallback_min_score` and nothing outside the frame scores higher), else
`BACK`, or `DONE` where BACK is not on the menu. Without it a model that disagrees with the
evidence tries sibling after sibling, each entered and left, until a limit ends the run with
no call (Seal-Tools test: 5 of the first 100 requests, 14-39 model calls each).

Plans are kept per run in memory; a run resumed in another process has none and simply routes
the rest of the way step by step.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from stackroute.runtime.errors import InputError
from stackroute.runtime.menu import CompletionState
from stackroute.runtime.router import RoutingRequest
from stackroute.runtime.speculation import opened_child
from stackroute.runtime.tree import PATH_SEP, Node
from stackroute.runtime.usage import Usage
from stackroute.server.embeddings.leaf_index import Aggregate, Evidence
from stackroute.server.routing.contrast import is_fresh, is_opening
from stackroute.server.routing.known_fields import from_known_fields
from stackroute.server.routing.lru import Lru
from stackroute.server.routing.menu_scoring import MenuScorer, ScoredMenu
from stackroute.server.routing.prior import PriorOptions


@dataclass(frozen=True, kw_only=True)
class RecoveryOptions:
    """Which mechanisms run, and their thresholds. Frozen; `from_dict` rejects unknown keys.

    `RecoveryOptions.off()` is plain routing (the paper's hierarchy) through the same code.
    """

    # leaf evidence, as a prior on every decision (prior.py)
    evidence_weight: float = 1.0  # 0: no prior
    evidence_temperature: float = 0.05
    evidence_aggregate: Aggregate = Aggregate.MAX
    out_of_scope_score: float = 0.3
    done_gap: float = 0.15
    back_gap: float = 0.1
    max_bias: float = 20.0
    # calibrated scoring (contrast.py)
    is_contrast_enabled: bool = False
    contrast_strength: float = 1.0
    # backtracking
    is_backtracking_enabled: bool = True
    min_confidence: float = 0.0  # BACK when the best option's probability is below this
    backtrack_gap: float | None = 0.15  # BACK when a leaf elsewhere is better by this; None: off
    # beam over branches
    beam_width: int = 1  # 1: off
    beam_margin: float = 0.7  # nats between the two best children that count as close
    # global fallback
    is_fallback_enabled: bool = True
    fallback_min_score: float = 0.35
    # recall: the evidence decides in a frame after this many BACKs (None: off)
    recall_after_backs: int | None = 2
    # finish: DONE with no model call once every part of the request that asks for a
    # capability has had its call (finish.py)
    is_finish_enabled: bool = True
    finish_part_score: float = 0.57
    # the trace
    top_k: int = 5

    def __post_init__(self) -> None:
        if self.beam_width < 1:
            raise InputError(f"beam_width must be at least 1, got {self.beam_width}")
        if self.evidence_weight < 0 or self.evidence_temperature <= 0:
            raise InputError("evidence_weight must be >= 0 and evidence_temperature > 0")
        if not isinstance(self.evidence_aggregate, Aggregate):
            object.__setattr__(self, "evidence_aggregate", Aggregate(self.evidence_aggregate))

    @classmethod
    def off(cls) -> RecoveryOptions:
        return cls(evidence_weight=0.0, is_contrast_enabled=False,
                   is_backtracking_enabled=False, beam_width=1, is_fallback_enabled=False,
                   is_finish_enabled=False)

    @property
    def needs_evidence(self) -> bool:
        return (self.evidence_weight > 0 or self.is_fallback_enabled or self.is_finish_enabled
                or (self.is_backtracking_enabled and self.backtrack_gap is not None))

    @property
    def prior(self) -> PriorOptions:
        return PriorOptions(weight=self.evidence_weight, temperature=self.evidence_temperature,
                            aggregate=self.evidence_aggregate,
                            out_of_scope_score=self.out_of_scope_score, done_gap=self.done_gap,
                            back_gap=self.back_gap, max_bias=self.max_bias)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["evidence_aggregate"] = self.evidence_aggregate.value
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RecoveryOptions:
        return from_known_fields(cls, data, what="recovery option")


@dataclass(frozen=True)
class MenuStep:
    """What the policy decided at one menu, ready to become a `Decision`."""

    choice: str
    probabilities: dict[str, float] | None
    margin: float | None
    usage: Usage
    detail: dict[str, Any] = field(default_factory=dict)


class PlanReason(StrEnum):
    """Why a run follows a plan down (a hop per frame, no new search)."""

    BEAM = "beam"  # the beam explored the path: each hop's call is a memo hit
    FALLBACK = "fallback"  # evidence alone chose the leaf: no model call on the way down


@dataclass(frozen=True)
class Plan:
    path: tuple[str, ...]  # node path of the target leaf
    reason: PlanReason


class RecoveryPolicy:
    """Decides each menu with the mechanisms `options` switches on."""

    def __init__(self, scorer: MenuScorer, options: RecoveryOptions, *,
                 max_runs: int = 1024) -> None:
        self.scorer = scorer
        self.options = options
        self.max_runs = max_runs
        self._plans: Lru[str, Plan] = Lru(max_entries=max_runs)
        self.finish = scorer.focus if options.is_finish_enabled else None

    def decide(self, request: RoutingRequest) -> MenuStep:
        finished = self._finish(request)
        if finished is not None:
            return finished
        planned = self._follow_plan(request)
        if planned is not None:
            return planned
        recalled = self._recall(request)
        if recalled is not None:
            return recalled
        scored = self.scorer.score(request)
        detail = scored.detail(top_k=self.options.top_k)
        usage = scored.usage
        choice = scored.choice
        reason = self._backtrack_reason(request, scored)
        if reason is not None:
            detail["backtrack"] = {"from": choice, "reason": reason}
            return MenuStep(CompletionState.BACK.value, scored.probabilities,
                            scored.result.margin, usage, detail)
        veto = self._back_veto(request, scored)
        if veto is not None:
            detail["back_veto"] = {"to": veto[0], "reason": veto[1]}
            choice = veto[0]
        if self.options.beam_width > 1 and choice in request.menu.children:
            beam = self._beam(request, scored)
            if beam is not None:
                choice, plan, beam_usage, beam_detail = beam
                usage = usage + beam_usage
                detail["beam"] = beam_detail
                if len(plan) > request.node.depth + 1:
                    self._remember(request.run_id, Plan(plan, PlanReason.BEAM))
        if choice == CompletionState.DONE and request.node.depth == 0 and not request.calls:
            fallback = self._fallback(request, scored)
            if fallback is not None:
                detail["fallback"] = {"from": choice, "leaf": PATH_SEP.join(fallback[0]),
                                      "score": round(fallback[1], 4)}
                choice = fallback[0][0]
                if len(fallback[0]) > 1:
                    self._remember(request.run_id, Plan(fallback[0], PlanReason.FALLBACK))
        return MenuStep(choice, scored.probabilities, scored.result.margin, usage, detail)

    # -- finish ----------------------------------------------------------------------------------
    def _finish(self, request: RoutingRequest) -> MenuStep | None:
        if (self.finish is None or not request.calls
                or CompletionState.DONE.value not in request.menu):
            return None
        verdict = self.finish.check(request.task, request.calls)
        if not verdict.is_done:
            return None
        self._plans.pop(request.run_id)
        return MenuStep(CompletionState.DONE.value, None, None, Usage(),
                        {"finish": verdict.detail})

    # -- plans ---------------------------------------------------------------------------------
    def _follow_plan(self, request: RoutingRequest) -> MenuStep | None:
        plan = self._plans.get(request.run_id)
        if plan is None:
            return None
        here = request.node.path
        on_path = plan.path[:len(here)] == here and len(plan.path) > len(here)
        hop = plan.path[len(here)] if on_path else ""
        if not (on_path and is_fresh(request) and hop in request.menu.children):
            self._plans.pop(request.run_id)  # the run left the plan (a BACK, a limit)
            return None
        if len(plan.path) == len(here) + 1:
            self._plans.pop(request.run_id)  # the last hop: the leaf
        detail: dict[str, Any] = {"plan": {"reason": plan.reason.value,
                                           "leaf": PATH_SEP.join(plan.path)}}
        if plan.reason is PlanReason.FALLBACK:  # evidence alone: no model call on the way down
            return MenuStep(hop, None, None, Usage(), detail)
        scored = self.scorer.score(request)  # the beam explored this prompt: a memo hit
        detail.update(scored.detail(top_k=self.options.top_k))
        return MenuStep(hop, scored.probabilities, scored.result.margin, scored.usage, detail)

    def _remember(self, run_id: str, plan: Plan) -> None:
        self._plans.put(run_id, plan)

    # -- recall ----------------------------------------------------------------------------------
    def _recall(self, request: RoutingRequest) -> MenuStep | None:
        """The evidence's decision for a frame with `recall_after_backs` branches abandoned
        (None: the frame is not there yet, or recall is off)."""
        after = self.options.recall_after_backs
        menu = request.menu
        if after is None or menu.is_shortlisted or not self.options.is_backtracking_enabled:
            return None
        abandoned = [c.name for c in request.node.children if c.name not in menu.children]
        if len(abandoned) < after:
            return None
        evidence = self.scorer.evidence_for(request)
        if evidence is None:
            return None
        remaining = evidence.without(request.calls)
        best = _best_on_menu(request, remaining)
        here = request.node.path_str
        outside = remaining.outside_score(here) if here else -math.inf
        detail: dict[str, Any] = {"recall": {"abandoned": abandoned}}
        if best is not None and best[1] >= self.options.fallback_min_score \
                and best[1] >= outside:
            path = tuple(best[0].split(PATH_SEP))
            detail["recall"] |= {"leaf": best[0], "score": round(best[1], 4)}
            if len(path) > request.node.depth + 1:
                self._remember(request.run_id, Plan(path, PlanReason.FALLBACK))
            return MenuStep(path[request.node.depth], None, None, Usage(), detail)
        state = CompletionState.BACK if CompletionState.BACK.value in menu \
            else CompletionState.DONE
        if state.value not in menu:
            return None
        detail["recall"]["best_elsewhere"] = round(outside, 4) if here else None
        return MenuStep(state.value, None, None, Usage(), detail)

    # -- backtracking ----------------------------------------------------------------------------
    def _backtrack_reason(self, request: RoutingRequest, scored: ScoredMenu) -> str | None:
        options = self.options
        if (not options.is_backtracking_enabled or request.node.depth == 0
                or CompletionState.BACK.value not in request.menu
                or scored.choice == CompletionState.BACK or not is_opening(request)):
            return None
        best = scored.probabilities.get(scored.choice, 0.0)
        if best < options.min_confidence:
            return f"best option {scored.choice} has p={best:.3f} < {options.min_confidence}"
        evidence = scored.evidence
        if options.backtrack_gap is not None and evidence is not None:
            remaining = evidence.without(request.calls)
            inside = remaining.node_score(request.node.path_str)
            outside = remaining.outside_score(request.node.path_str)
            if inside < outside - options.backtrack_gap:
                return (f"best leaf here scores {inside:.3f}, best elsewhere {outside:.3f} "
                        f"(gap > {options.backtrack_gap})")
        return None

    def _back_veto(self, request: RoutingRequest, scored: ScoredMenu,
                   ) -> tuple[str, str] | None:
        """The best child instead of the model's BACK, when a fresh frame's subtree holds the
        best remaining leaf by more than `backtrack_gap` (small models over-pick BACK, and a
        branch left with BACK is never offered again in the parent)."""
        options = self.options
        evidence = scored.evidence
        if (scored.choice != CompletionState.BACK or not options.is_backtracking_enabled
                or options.backtrack_gap is None or evidence is None
                or not request.menu.children or not is_opening(request)):
            return None
        remaining = evidence.without(request.calls)
        inside = remaining.node_score(request.node.path_str)
        outside = remaining.outside_score(request.node.path_str)
        if inside < outside + options.backtrack_gap:
            return None
        best = scored.ranked_children(request.menu.children)[0][0]
        return best, (f"best leaf here scores {inside:.3f}, best elsewhere {outside:.3f} "
                      f"(lead > {options.backtrack_gap})")

    # -- beam --------------------------------------------------------------------------------------
    def _beam(self, request: RoutingRequest, scored: ScoredMenu,
              ) -> tuple[str, tuple[str, ...], Usage, dict[str, Any]] | None:
        ranked = scored.ranked_children(request.menu.children)
        if len(ranked) < 2 or ranked[0][1] <= 0:
            return None
        top = math.log(ranked[0][1])
        close = [(c, p) for c, p in ranked[: self.options.beam_width]
                 if p > 0 and top - math.log(p) < self.options.beam_margin]
        if len(close) < 2:
            return None
        usage = Usage()
        explored: list[tuple[float, str, tuple[str, ...]]] = []
        candidates = []
        for name, p in close:
            path, logp, cost, num_calls = self._descend(request, name, math.log(p))
            usage = usage + cost
            explored.append((logp, name, path))
            candidates.append({"child": name, "leaf": PATH_SEP.join(path),
                               "path_logprob": round(logp, 4), "calls": num_calls})
        _, choice, plan = max(explored, key=lambda e: e[0])  # first best on ties
        return choice, plan, usage, {"candidates": candidates, "chosen": choice,
                                     "extra_calls": usage.model_calls}

    def _descend(self, request: RoutingRequest, name: str, logp: float,
                 ) -> tuple[tuple[str, ...], float, Usage, int]:
        """Greedy descent from child `name` on hypothetical fresh frames: the reached leaf's
        path, its log-probability (this menu's choice included), the cost and calls made."""
        usage = Usage()
        node = request.child(name)
        hypothetical = request
        num_calls = 0
        while not node.is_leaf:
            hypothetical = child_request(hypothetical, node)
            step = self.scorer.score(hypothetical)
            usage = usage + step.usage
            num_calls += 0 if step.is_reused else 1
            ranked = step.ranked_children(hypothetical.menu.children)
            best, p = ranked[0]
            logp += math.log(max(p, 1e-300))
            node = hypothetical.child(best)
        return node.path, logp, usage, num_calls

    # -- fallback ----------------------------------------------------------------------------------
    def _fallback(self, request: RoutingRequest, scored: ScoredMenu,
                  ) -> tuple[tuple[str, ...], float] | None:
        if not self.options.is_fallback_enabled or scored.evidence is None:
            return None
        best = _best_on_menu(request, scored.evidence)
        if best is None or best[1] < self.options.fallback_min_score:
            return None
        return tuple(best[0].split(PATH_SEP)), best[1]


def _best_on_menu(request: RoutingRequest, evidence: Evidence) -> tuple[str, float] | None:
    """The evidence's best leaf under the children still on `request`'s menu, and its score
    (None: no child on the menu)."""
    best: tuple[str, float] | None = None
    for name in request.menu.children:
        leaf, score = evidence.best(request.child(name).path_str)
        if best is None or score > best[1]:
            best = (leaf, score)
    return best


def child_request(request: RoutingRequest, child: Node) -> RoutingRequest:
    """The request the runtime would make on entering `child` from `request`'s fresh menu:
    the parent's prompt plus the answer and the child's opening turn (shortlisted where the
    machine's shortlister says), a fresh menu with BACK."""
    return opened_child(request, child)

