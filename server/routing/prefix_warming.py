"""Warm on load: what every request on a catalog shares is computed before the first arrives.

With the menu-first prompt order (`runtime/prompt.py`) every routing prompt on a catalog
starts with the same header: the system text and the root's menu. The guided policy also
needs the neutral contrast of each menu it meets (`contrast.py`): a per-catalog constant, one
engine call per menu. At load, `PrefixWarmer` routes the root's neutral prompt (the header
plus a content-free request), which both fills the router's contrast for the root and leaves
the header's KV in the engine's prefix cache (transformers: the radix tree; vLLM: its
automatic prefix caching), so the first request prefills only its own text. `WarmScope.ALL`
also computes every inner menu's contrast (one short call each, on top of the cached header).

The warming runs in a background thread of its own: a catalog upload (`POST /v1/catalogs`)
or a server start does not wait for model calls, and the warming's engine calls are not
traced as part of the request that loaded the catalog (a fresh thread starts with an empty
context: they are traces of their own). A request that arrives before the warming ends is
served as without it; a warming that fails is logged, never raised into the load.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TYPE_CHECKING

from stackroute.runtime.speculation import descend
from stackroute.runtime.tree import CapabilityTree
from stackroute.runtime.usage import Usage

if TYPE_CHECKING:
    from stackroute.runtime.router import RoutingRequest
    from stackroute.server.routing.contrast import NeutralContrast
    from stackroute.server.routing.pool import RouterPool
    from stackroute.server.routing.router import EngineRouter

log = logging.getLogger(__name__)


class WarmScope(StrEnum):
    """How much a catalog load computes ahead of its first request."""

    OFF = "off"
    ROOT = "root"  # the shared header (and the root menu's neutral contrast, guided)
    ALL = "all"  # and every inner menu's neutral contrast (guided; one call per router)


@dataclass(frozen=True)
class WarmReport:
    num_menus: int  # menus whose neutral contrast (or header) was computed
    usage: Usage
    wall_ms: float


class PrefixWarmer:
    """A catalog-load hook: the pool's own preparation (the leaf index), then the warming.

    >>> WarmScope("root").value
    'root'
    """

    def __init__(self, pool: RouterPool, *, scope: WarmScope = WarmScope.ROOT) -> None:
        self.pool = pool
        self.scope = scope
        self._lock = threading.Lock()
        self._running: list[threading.Thread] = []

    def prepare(self, tree: CapabilityTree) -> None:
        """The pool's preparation now; the warming in the background (see the module)."""
        self.pool.prepare(tree)
        if self.scope is WarmScope.OFF:
            return
        thread = threading.Thread(target=self._warm, args=(tree,), daemon=True,
                                  name=f"warm-on-load {tree.name}")
        with self._lock:
            self._running = [t for t in self._running if t.is_alive()] + [thread]
        thread.start()

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait for the warmings started so far; True when none is still running."""
        with self._lock:
            running = list(self._running)
        for thread in running:
            thread.join(timeout_s)
        return not any(t.is_alive() for t in running)

    def _warm(self, tree: CapabilityTree) -> None:
        try:
            warm_catalog(self.pool, tree, scope=self.scope)
        except Exception as e:  # the catalog is loaded; only its first request is slower
            log.warning("catalog %s: warm on load failed (%s: %s)", tree.name,
                        type(e).__name__, e)


def warm_catalog(pool: RouterPool, tree: CapabilityTree, *,
                 scope: WarmScope = WarmScope.ROOT) -> WarmReport:
    """Route the neutral prompt at the root (and, for `ALL`, at every router) through the
    pool's router for `tree`; what it computes stays in the router and the engine."""
    from stackroute.server.routing.contrast import NEUTRAL_REQUEST

    started = time.perf_counter()
    machine = pool.machine(tree)
    state = machine.start(NEUTRAL_REQUEST, run_id="warm-on-load")
    root = machine.request_for(state)
    contrast = contrast_of(pool.router(tree))  # the router the machine routes with
    requests = [root]
    if scope is WarmScope.ALL and contrast is not None:
        # every router's full menu (a shortlisted frame needs no contrast; after OTHER, the
        # full menu's is the one asked for)
        requests += list(_router_requests(replace(root, shortlister=None)))
    usage = Usage()
    for request in requests:
        if contrast is not None:
            usage += contrast.bias(request)[1]
        elif request.menu.options:  # plain: the header's KV is what there is to share
            usage += pool.engine.choose(request.prompt, request.menu.options).usage
    report = WarmReport(num_menus=len(requests), usage=usage,
                        wall_ms=(time.perf_counter() - started) * 1e3)
    log.info("catalog %s warmed: %d menu(s), %d tokens prefilled in %.0f ms", tree.name,
             report.num_menus, usage.prefill_tokens, report.wall_ms)
    return report


def contrast_of(router: EngineRouter) -> NeutralContrast | None:
    """The guided router's neutral contrast (None: plain, or the contrast is off)."""
    policy = router.policy
    return None if policy is None else policy.scorer.contrast


def _router_requests(root: RoutingRequest) -> list[RoutingRequest]:
    """The fresh request at every router below the root, depth first."""
    out: list[RoutingRequest] = []
    stack = [root]
    while stack:
        request = stack.pop()
        for child in request.node.children:
            if not child.is_leaf:
                below = descend(request, child.name)
                out.append(below)
                stack.append(below)
    return out
