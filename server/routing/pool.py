"""One router per loaded catalog, shared by every request and session of the server.

A router outlives a request: the guided policy's leaf evidence (an index over every leaf,
built when the catalog loads, not on its first request), the neutral contrast's per-menu
cache, the decision memo and per-run plans, and the speculator (whose verified decisions wait,
keyed by run id, for the routing calls that follow; for `/v1/route` those arrive as later
requests carrying the run's state) all pay off across requests. Keyed by the tree object (and
flat or not): a catalog replaced or uploaded twice under one name gets its own; the least
recently used beyond `max_catalogs` are dropped.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TypeVar

from stackroute.runtime.errors import InputError
from stackroute.runtime.governance import Limits
from stackroute.runtime.handlers import Executor
from stackroute.runtime.machine import StackMachine
from stackroute.runtime.tree import CapabilityTree
from stackroute.server.embeddings.embedder import TextEmbedder
from stackroute.server.embeddings.leaf_index import EvidenceSource
from stackroute.server.engines.base import Engine
from stackroute.server.routing.menu_fit import StyleCache
from stackroute.server.routing.options import RouterOptions
from stackroute.server.routing.plan import RoutingPlan
from stackroute.server.routing.router import (
    EngineRouter,
    build_machine,
    build_router,
    default_embedder,
    evidence_for_tree,
    product_options,
    routed_tree,
)

log = logging.getLogger(__name__)

_Key = tuple[int, bool]  # id(tree), is_flat
T = TypeVar("T")


class RouterPool:
    """The routers of one engine, one per catalog (and flat or not), built with one set of
    `options` (None: the product's, `router.product_options`), and what building machines
    shares: the leaf evidence and the menu styles fitted to the engine's context."""

    def __init__(self, engine: Engine, options: RouterOptions | None = None, *,
                 embedder_factory: Callable[[], TextEmbedder] | None = None,
                 max_catalogs: int = 64) -> None:
        self.engine = engine
        self.options = options or product_options(engine)
        # The plans every router of this pool walks (built once: the router builds the same).
        self.plans = {is_flat: RoutingPlan.for_engine(self.options, engine, is_flat=is_flat)
                      for is_flat in (False, True)}
        self._embedder_factory = embedder_factory or default_embedder
        self._embedder: TextEmbedder | None = None
        self._is_embedder_missing = False
        self.max_catalogs = max_catalogs
        # key -> (tree, router, evidence); holding the tree keeps its id from being reused
        self._routers: OrderedDict[_Key, tuple[CapabilityTree, EngineRouter]] = OrderedDict()
        self._evidence: OrderedDict[_Key, tuple[CapabilityTree, EvidenceSource]] = \
            OrderedDict()
        self.styles = StyleCache()  # per catalog tree and model: a machine per request
        self._lock = threading.Lock()

    @property
    def needs_evidence(self) -> bool:
        return self.plans[False].needs_evidence

    def prepare(self, tree: CapabilityTree) -> None:
        """Build what the first request would otherwise wait for: the leaf index (embeds every
        leaf, cached on disk) when the policy or the drafts use evidence."""
        if self.needs_evidence:
            self.evidence_for(tree)

    def machine(self, tree: CapabilityTree, *, is_flat: bool = False,
                limits: Limits | None = None,
                executor: Executor | None = None) -> StackMachine:
        return build_machine(tree, self.engine, is_flat=is_flat, limits=limits,
                             executor=executor, styles=self.styles,
                             router=self.router(tree, is_flat=is_flat))

    def router(self, tree: CapabilityTree, *, is_flat: bool = False) -> EngineRouter:
        plan = self.plans[is_flat]

        def build() -> EngineRouter:
            evidence = self.evidence_for(tree, is_flat=is_flat) if plan.needs_evidence \
                else None
            # The embedder only matches near-identical requests in a route cache: load it
            # (about 90 MB, seconds) only for one.
            return build_router(routed_tree(tree, is_flat=is_flat), self.engine,
                                is_flat=is_flat, options=self.options,
                                embedder=self._embedder_or_none(tree)
                                if plan.uses_route_cache else None,
                                evidence=evidence)

        return self._cached(self._routers, tree, is_flat, build)

    def evidence_for(self, tree: CapabilityTree, *, is_flat: bool = False) -> EvidenceSource:
        def build() -> EvidenceSource:
            embedder = self._embedder_or_none(tree)
            if embedder is None:
                from stackroute.server.routing.calibration import require_embedder

                require_embedder()  # raises, naming the package
            return evidence_for_tree(routed_tree(tree, is_flat=is_flat), embedder,
                                     shorthand=self.options.shorthand)

        return self._cached(self._evidence, tree, is_flat, build)

    def _cached(self, entries: OrderedDict[_Key, tuple[CapabilityTree, T]],
                tree: CapabilityTree, is_flat: bool, build: Callable[[], T]) -> T:
        """The entry for (tree, is_flat), built on a miss outside the lock (building embeds
        every leaf, cached on disk); the first of two racing builds wins."""
        key = (id(tree), is_flat)
        with self._lock:
            found = entries.get(key)
            if found is not None:
                entries.move_to_end(key)
                return found[1]
        built = build()
        with self._lock:
            current = entries.get(key)
            if current is not None:
                return current[1]
            entries[key] = (tree, built)
            while len(entries) > self.max_catalogs:
                entries.popitem(last=False)
        return built

    def _embedder_or_none(self, tree: CapabilityTree) -> TextEmbedder | None:
        """The shared embedder, loaded on first use; None (and a warning) without the
        embedding package, so a route cache matches requests by exact text only."""
        with self._lock:
            if self._embedder is not None or self._is_embedder_missing:
                return self._embedder
        try:
            embedder = self._embedder_factory()
        except InputError as e:
            with self._lock:
                self._is_embedder_missing = True
            log.warning("catalog %r: no embedding model (%s); route caches match requests "
                        "by exact text only", tree.name, e)
            return None
        with self._lock:
            self._embedder = embedder
        return embedder
