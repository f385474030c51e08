"""One `Speculator` per loaded catalog, shared by every request and session of the server.

The speculator must outlive a single HTTP request: the decisions a verified path yields wait
(keyed by run id) for the routing calls that follow, which for `/v1/route` arrive as later
requests carrying the run's state, and the route cache learns from every run. Built on first
use of a catalog (keyed by the tree object: a catalog replaced or uploaded twice under one
name gets its own); the least recently used beyond `max_catalogs` are dropped.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable

from stackroute.runtime.errors import InputError
from stackroute.runtime.tree import CapabilityTree
from stackroute.server.embeddings.leaf_index import TextEmbedder
from stackroute.server.engines.base import Engine
from stackroute.server.engines.verification import PathVerifier
from stackroute.server.routing.options import DraftSource
from stackroute.server.routing.router import default_embedder, evidence_for_tree
from stackroute.server.routing.speculator import RouteCache, Speculator, make_drafter

log = logging.getLogger(__name__)


class SpeculatorPool:
    def __init__(self, engine: Engine, source: DraftSource,
                 embedder_factory: Callable[[], TextEmbedder] | None = None, *,
                 max_catalogs: int = 64) -> None:
        self.engine = engine
        self.source = source
        self._embedder_factory = embedder_factory or default_embedder
        self._embedder: TextEmbedder | None = None
        self._is_embedder_missing = False
        self.max_catalogs = max_catalogs
        # id(tree) -> (tree, speculator); holding the tree keeps its id from being reused
        self._by_tree: OrderedDict[int, tuple[CapabilityTree, Speculator]] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def is_active(self) -> bool:
        """Off, or an engine that cannot verify paths (vLLM, remote): route step by step."""
        return self.source is not DraftSource.OFF and isinstance(self.engine, PathVerifier)

    def for_tree(self, tree: CapabilityTree) -> Speculator | None:
        if not self.is_active:
            return None
        with self._lock:
            found = self._by_tree.get(id(tree))
            if found is not None:
                self._by_tree.move_to_end(id(tree))
                return found[1]
            embedder = self._embedder_for(tree)
        # Building the leaf index embeds every leaf (cached on disk): outside the lock.
        evidence = None
        if self.source in (DraftSource.EVIDENCE, DraftSource.BOTH):
            if embedder is None:
                raise InputError(f"speculation {self.source.value!r} needs the embedding "
                                 "model (pip install 'stackroute[embed]')")
            evidence = evidence_for_tree(tree, embedder)
        routes = RouteCache(embedder) if self.source in (
            DraftSource.ROUTES, DraftSource.BOTH) else None
        drafter = make_drafter(self.source, evidence=evidence, routes=routes)
        assert drafter is not None  # the source is not OFF
        speculator = Speculator(self.engine, drafter)
        with self._lock:
            current = self._by_tree.get(id(tree))
            if current is not None:
                return current[1]  # another thread built it meanwhile
            self._by_tree[id(tree)] = (tree, speculator)
            while len(self._by_tree) > self.max_catalogs:
                self._by_tree.popitem(last=False)
        return speculator

    def _embedder_for(self, tree: CapabilityTree) -> TextEmbedder | None:
        """The shared embedder, loaded on first use; None (and a warning) without the
        embedding package, so the route cache matches requests by exact text only."""
        if self._embedder is None and not self._is_embedder_missing:
            try:
                self._embedder = self._embedder_factory()
            except InputError as e:
                self._is_embedder_missing = True
                log.warning("route cache of %r matches requests by exact text only: %s",
                            tree.name, e)
        return self._embedder
