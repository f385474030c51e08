"""Speculative routing: draft a path root → … → leaf, verify it in one model pass, keep the
decisions step-by-step routing would have made.

A `Speculator` is one of `EngineRouter`'s step sources (`plan.py`). At a routing call with
no verified decision waiting (the plan's memo source looks first), it asks its drafter
for a path from the current node down to a leaf; when the path has two levels or more
and the engine can verify paths, the engine computes the model's
constrained choice at every drafted level in one pass (`verification.py`). The decisions
kept are exactly those of greedy step-by-step routing: level 1 always (its context is the
real one), and level k + 1 while every level up to k chose its drafted name — like the
bonus token of speculative decoding, the first disagreement is itself a correct decision.
A level whose closest call (`margin`) is under `min_margin` is not trusted, since one long
pass and several short ones can round differently; routing goes step by step from there.

Kept decisions wait, per run, for the routing calls the machine makes next; each is handed
out only if the machine asks exactly the predicted request (`runtime/speculation.py`), so a
limit, a resume in another process or anything else unforeseen costs the speculation only.

Drafts come from leaf evidence (the embedding index's best leaf not yet called under the
current node), from a cache of the routes the model took for earlier requests (exact text,
else the nearest request by embedding above a similarity floor), or from both (the route
cache first). Each decision's `detail["speculation"]` records the level, the draft, its
source and whether the model agreed; the first level's usage counts the levels speculated
and accepted.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from stackroute.runtime.router import RoutingRequest
from stackroute.runtime.speculation import drafted_requests
from stackroute.runtime.tree import Node
from stackroute.runtime.usage import Usage
from stackroute.server.embeddings.embedder import TextEmbedder
from stackroute.server.embeddings.leaf_index import EvidenceSource
from stackroute.server.engines.base import ContextOverflowError, Engine
from stackroute.server.engines.verification import PathLevel, PathVerifier
from stackroute.server.routing.options import DraftSource
from stackroute.server.routing.plan import Passed
from stackroute.server.routing.recovery import MenuStep
from stackroute.server.routing.verified import (
    MAX_RUNS_WAITING,
    WaitingDecisions,
    kept_levels,
    trusted_margin,
)

log = logging.getLogger(__name__)

DEFAULT_MAX_LEVELS = 8
DEFAULT_MAX_FAILED_DRAFTS = 1  # per run: a draft that kept < 2 levels cost a longer pass


@dataclass(frozen=True)
class Draft:
    names: tuple[str, ...]  # from the current node down; every name a router but the last
    source: str


class Drafter:
    def draft(self, request: RoutingRequest) -> Draft | None:
        raise NotImplementedError

    def record(self, request: RoutingRequest, leaf: Node) -> None:
        """The router chose `leaf` for `request` (drafters that learn from routes use it)."""


class EvidenceDrafter(Drafter):
    """The best leaf by embedding under the current node, skipping leaves already called."""

    def __init__(self, evidence: EvidenceSource) -> None:
        self.evidence = evidence

    def draft(self, request: RoutingRequest) -> Draft | None:
        scores = self.evidence.for_request(request.task).without(request.calls)
        path, score = scores.best(request.node.path_str)
        if not np.isfinite(score):
            return None
        return _draft_to(request, path, "evidence")


class RouteCache(Drafter):
    """The leaves the model chose for earlier requests, looked up by exact text or by the
    nearest earlier request (cosine of sentence embeddings at least `min_similarity`).
    Bounded LRU over requests; thread-safe."""

    def __init__(self, embedder: TextEmbedder | None = None, *, min_similarity: float = 0.9,
                 max_requests: int = 4096) -> None:
        self.embedder = embedder
        self.min_similarity = min_similarity
        self.max_requests = max_requests
        self._routes: OrderedDict[str, list[str]] = OrderedDict()  # task -> leaf paths
        self._vectors: dict[str, NDArray[np.float32]] = {}  # the cached requests'
        self._asked: OrderedDict[str, NDArray[np.float32]] = OrderedDict()  # lookups'
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._routes)

    def record(self, request: RoutingRequest, leaf: Node) -> None:
        self.remember(request.task, leaf.path_str, call_number=len(request.calls))

    def remember(self, task: str, leaf_path: str, *, call_number: int) -> None:
        """`leaf_path` was chosen for call `call_number` (0-based) of a run of `task`."""
        vector = None
        if self.embedder is not None and task not in self._vectors:
            vector = self._embed(task)
        with self._lock:
            route = self._routes.setdefault(task, [])
            self._routes.move_to_end(task)
            if vector is not None:
                self._vectors[task] = vector
            # The first leaf chosen for each call of the run: a greedy model asked the same
            # request again walks to it first (later choices for the same call number
            # follow a misstep or a rejection, which a draft from the top cannot predict).
            if call_number == len(route):
                route.append(leaf_path)
            while len(self._routes) > self.max_requests:
                old, _ = self._routes.popitem(last=False)
                self._vectors.pop(old, None)

    def draft(self, request: RoutingRequest) -> Draft | None:
        route = self._lookup(request.task)
        if route is None:
            return None
        called = set(request.calls)
        prefix = request.node.path_str
        for path in route:
            if path not in called and (not prefix or path.startswith(prefix + "/")):
                return _draft_to(request, path, "routes")
        return None

    def _lookup(self, task: str) -> list[str] | None:
        with self._lock:
            route = self._routes.get(task)
            if route is not None:
                return list(route)
            if self.embedder is None or not self._vectors:
                return None
            tasks = list(self._vectors)
            matrix = np.stack([self._vectors[t] for t in tasks])
        similarity = matrix @ self._embed(task)
        best = int(np.argmax(similarity))
        if float(similarity[best]) < self.min_similarity:
            return None
        with self._lock:
            found = self._routes.get(tasks[best])
            return None if found is None else list(found)

    def _embed(self, task: str) -> NDArray[np.float32]:
        """The request's unit vector, memoised: a run asks once per routing call."""
        assert self.embedder is not None
        with self._lock:
            vector = self._asked.get(task)
            if vector is not None:
                self._asked.move_to_end(task)
                return vector
        vector = _unit(self.embedder.embed([task])[0])
        with self._lock:
            self._asked[task] = vector
            while len(self._asked) > self.max_requests:
                self._asked.popitem(last=False)
        return vector


class FirstDraft(Drafter):
    """The first drafter that has a draft (e.g. the route cache, then evidence)."""

    def __init__(self, drafters: Sequence[Drafter]) -> None:
        self.drafters = list(drafters)

    def draft(self, request: RoutingRequest) -> Draft | None:
        for drafter in self.drafters:
            found = drafter.draft(request)
            if found is not None:
                return found
        return None

    def record(self, request: RoutingRequest, leaf: Node) -> None:
        for drafter in self.drafters:
            drafter.record(request, leaf)


class DraftBudget:
    """Failed drafts per run (a draft that kept fewer than two levels saved no call and cost a
    longer pass); a run with `max_failed` of them routes step by step from then on."""

    def __init__(self, max_failed: int) -> None:
        self.max_failed = max_failed
        self._failed: OrderedDict[str, int] = OrderedDict()  # run id -> failed drafts
        self._lock = threading.Lock()

    def is_spent(self, run_id: str) -> bool:
        with self._lock:
            return self._failed.get(run_id, 0) >= self.max_failed

    def count_failure(self, run_id: str) -> None:
        with self._lock:
            self._failed[run_id] = self._failed.get(run_id, 0) + 1
            self._failed.move_to_end(run_id)
            while len(self._failed) > MAX_RUNS_WAITING:
                self._failed.popitem(last=False)


class Speculator:
    """Drafts, verifies and hands out the verified decisions of one router.

    A draft that keeps fewer than two levels saved no call and cost a longer pass; after
    `max_failed_drafts` of those in one run, the run routes step by step (the model has left
    the drafter's path: on a CPU, where extra tokens cost their compute, drafting again at
    every level would only repeat the loss)."""

    def __init__(self, engine: Engine, drafter: Drafter, *,
                 min_margin: float | None = None,
                 max_levels: int = DEFAULT_MAX_LEVELS,
                 max_failed_drafts: int = DEFAULT_MAX_FAILED_DRAFTS) -> None:
        if max_levels < 2:
            raise ValueError(f"max_levels must be at least 2 to save a call; got {max_levels}")
        self.verifier = engine if isinstance(engine, PathVerifier) else None
        self.drafter = drafter
        self.min_margin = trusted_margin(engine) if min_margin is None else min_margin
        self.max_levels = max_levels
        self.max_failed_drafts = max_failed_drafts
        self.waiting = WaitingDecisions()
        self.budget = DraftBudget(max_failed_drafts)

    def step(self, request: RoutingRequest) -> MenuStep | Passed | None:
        """The decision at `request` from a drafted path verified in one pass (the later
        kept levels wait in `waiting`); `Passed` when the pass kept no level (its cost goes
        to the step-by-step decision); None when there is nothing to verify."""
        verifier = self.verifier
        if verifier is None or self.budget.is_spent(request.run_id):
            return None
        draft = self.drafter.draft(request)
        if draft is None or len(draft.names) < 2 or draft.names[0] not in request.menu:
            return None
        names = draft.names[:self.max_levels]
        requests = drafted_requests(request, names)
        try:
            results = verifier.verify_path(
                [PathLevel(r.prompt, r.menu.options, name)
                 for r, name in zip(requests, names, strict=True)])
        except (ValueError, ContextOverflowError) as e:
            # A name that tokenises differently inside the turn (PathLayoutError), a drafted
            # level past the context or with a menu that does not compile: step-by-step
            # routing may never go there, so the draft must not fail the run.
            log.debug("draft %s not verifiable: %s", "/".join(names), e)
            return None
        kept = kept_levels(results, names, min_margin=self.min_margin)
        if len(kept) < 2:
            self.budget.count_failure(request.run_id)
        if not kept:  # even level 1 was too close to call from the long pass
            return Passed(results[0].usage, {"speculation": {
                "levels": len(names), "accepted": 0, "source": draft.source,
                "fallback": "margin"}})
        accepted = sum(results[k].choice == names[k] for k in range(len(kept)))
        steps = []
        for k in range(len(kept)):
            usage = results[k].usage
            if k == 0:
                usage = usage + Usage(speculated_levels=len(names), accepted_levels=accepted)
            steps.append(MenuStep(results[k].choice, results[k].probabilities,
                                  results[k].margin, usage, {
                                      "margin": results[k].margin, "speculation": {
                                          "level": k, "levels": len(names),
                                          "draft": names[k], "source": draft.source,
                                          "accepted": results[k].choice == names[k]}}))
        self.waiting.put(request.run_id, requests[1:len(steps)], steps[1:])
        return steps[0]

    def record(self, request: RoutingRequest, leaf: Node) -> None:
        self.drafter.record(request, leaf)

def _draft_to(request: RoutingRequest, leaf_path: str, source: str) -> Draft | None:
    """The names from `request.node` down to the leaf at `leaf_path`, if it lies below."""
    leaf = request.layout.tree.get(leaf_path)
    node = request.node
    if leaf is None or leaf.path[:node.depth] != node.path or len(leaf.path) <= node.depth:
        return None
    return Draft(names=leaf.path[node.depth:], source=source)


def _unit(vector: NDArray[np.float32]) -> NDArray[np.float32]:
    norm = float(np.linalg.norm(vector))
    result: NDArray[np.float32] = vector / norm if norm > 0 else vector
    return result


def make_drafter(source: DraftSource, *, evidence: EvidenceSource | None,
                 routes: RouteCache | None) -> Drafter | None:
    """The drafter for `source`; None when speculation is off."""
    if source is DraftSource.OFF:
        return None
    if source in (DraftSource.EVIDENCE, DraftSource.BOTH) and evidence is None:
        raise ValueError(f"speculation {source.value!r} drafts from leaf evidence; none given")
    if source in (DraftSource.ROUTES, DraftSource.BOTH) and routes is None:
        raise ValueError(f"speculation {source.value!r} drafts from a route cache; none given")
    if source is DraftSource.EVIDENCE:
        assert evidence is not None
        return EvidenceDrafter(evidence)
    if source is DraftSource.ROUTES:
        assert routes is not None
        return routes
    assert evidence is not None and routes is not None
    return FirstDraft([routes, EvidenceDrafter(evidence)])
