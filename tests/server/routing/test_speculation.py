"""Speculative routing keeps step-by-step routing's decisions, only in fewer passes.

Tier a: a deterministic fake engine (its choice is a pure function of the prompt, as greedy
decoding is) checks acceptance, the near-tie fallback, the waiting queue and the usage
counts. Tier b: the real embedded model checks that one tree-attention pass gives the same
decisions as step-by-step calls, and that a route cache draft is accepted whole.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

import pytest
from doubles import HashEngine, WordEmbedder
from stackroute.runtime.catalog import build_tree
from stackroute.runtime.governance import Limits
from stackroute.runtime.machine import StackMachine
from stackroute.runtime.router import RoutingRequest
from stackroute.runtime.state import RunState
from stackroute.runtime.tree import CapabilityTree, Node
from stackroute.server.engines.base import (
    ContextOverflowError,
    MenuResult,
)
from stackroute.server.engines.verification import PathLayoutError, PathLevel
from stackroute.server.routing.options import RouterOptions
from stackroute.server.routing.router import EngineRouter, build_machine
from stackroute.server.routing.speculator import (
    Draft,
    DraftBudget,
    Drafter,
    DraftSource,
    RouteCache,
)

# root ─ a ─ a1 ─ a1x (leaf), a1y (leaf)
#      │   └ a2 (leaf)
#      └ b ─ b1 ─ b1x ─ deep (leaf)
#          └ b2 (leaf)
DEEP_CATALOG: dict[str, Any] = {"name": "deep", "description": "", "children": [
    {"name": "a", "description": "A things.", "children": [
        {"name": "a1", "description": "A1 things.", "children": [
            {"name": "a1x", "description": "Do a1x."},
            {"name": "a1y", "description": "Do a1y."}]},
        {"name": "a2", "description": "Do a2."}]},
    {"name": "b", "description": "B things.", "children": [
        {"name": "b1", "description": "B1 things.", "children": [
            {"name": "b1x", "description": "B1x things.", "children": [
                {"name": "deep", "description": "Do deep."}]}]},
        {"name": "b2", "description": "Do b2."}]}]}


def _h(*parts: Any) -> int:
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:8], "big")


class FixedDrafter(Drafter):
    """Drafts `path` (a leaf's node path) from any node above it."""

    def __init__(self, paths: Sequence[str]) -> None:
        self.paths = list(paths)
        self.recorded: list[str] = []

    def draft(self, request: RoutingRequest) -> Draft | None:
        for path in self.paths:
            names = tuple(path.split("/"))
            if names[:request.node.depth] == request.node.path and \
                    path not in request.calls:
                return Draft(names[request.node.depth:], "fixed")
        return None

    def record(self, request: RoutingRequest, leaf: Node) -> None:
        self.recorded.append(leaf.path_str)


def run(tree: CapabilityTree, engine: HashEngine, drafter: Drafter | None, *,
        limits: Limits | None = None, task: str = "do the thing",
        max_failed_drafts: int = 1) -> RunState:
    options = RouterOptions(recovery=None, speculation=DraftSource.OFF if drafter is None
                            else DraftSource.EVIDENCE)  # the source: `drafter`, whatever it is
    router = EngineRouter(engine, options, drafter=drafter)  # type: ignore[arg-type]
    if router.speculator is not None:
        router.speculator.budget = DraftBudget(max_failed_drafts)
    machine = StackMachine(tree, router, limits=limits or Limits(max_steps=40),
                           clock=lambda: 0.0)
    state = machine.start(task, run_id="r1")
    machine.run(state)
    return state


def decisions(state: RunState) -> list[tuple[Any, ...]]:
    """The trace without what speculation may change: usage, margins and its own marks."""
    out = []
    for e in state.trace:
        detail = {k: v for k, v in e.detail.items() if k not in ("speculation", "margin")}
        out.append((e.kind.value, e.path, e.decision, json.dumps(e.arguments, sort_keys=True),
                    json.dumps(e.probabilities, sort_keys=True), e.error,
                    json.dumps(detail, sort_keys=True, default=str)))
    return out


def speculation_marks(state: RunState) -> list[dict[str, Any]]:
    return [dict(e.detail["speculation"]) for e in state.trace if "speculation" in e.detail]


def deep_engine(**kw: Any) -> HashEngine:
    """An engine that walks root → b → b1 → b1x → deep, then answers DONE back up."""
    return HashEngine(prefer={"a": "b", "b1": "b1", "b1x": "b1x", "deep": "deep"}, **kw)


def test_a_right_draft_is_accepted_whole_in_one_verification() -> None:
    tree = build_tree(DEEP_CATALOG)
    plain, fast = deep_engine(), deep_engine()
    reference = run(tree, plain, None)
    drafter = FixedDrafter(["b/b1/b1x/deep"])
    state = run(tree, fast, drafter)
    assert decisions(state) == decisions(reference)
    assert [c["path"] for c in state.calls] == ["b/b1/b1x/deep"]
    marks = speculation_marks(state)
    assert [(m["level"], m["accepted"]) for m in marks] == \
        [(0, True), (1, True), (2, True), (3, True)]
    assert state.usage.speculated_levels == 4 and state.usage.accepted_levels == 4
    assert fast.verify_calls == 1
    # The four routing decisions took one pass; the remaining menus (after the leaf ran)
    # were answered step by step, as without speculation.
    assert fast.choose_calls == plain.choose_calls - 4
    assert drafter.recorded == ["b/b1/b1x/deep"]


def test_a_wrong_draft_keeps_the_first_disagreement_and_changes_nothing() -> None:
    tree = build_tree(DEEP_CATALOG)
    reference = run(tree, deep_engine(), None)
    fast = deep_engine()
    state = run(tree, fast, FixedDrafter(["b/b2", "a/a1/a1x"]))  # model goes b1, not b2
    assert decisions(state) == decisions(reference)
    first = speculation_marks(state)[:2]
    assert [(m["level"], m["draft"], m["accepted"]) for m in first] == \
        [(0, "b", True), (1, "b2", False)]  # level 1's own choice (b1) is still kept
    assert state.usage.accepted_levels >= 1


@pytest.mark.parametrize(("budget", "verifications"), [(1, 1), (5, 2)])
def test_a_run_stops_drafting_after_its_budget_of_failed_drafts(budget: int,
                                                                 verifications: int) -> None:
    """The draft a/a1/a1x loses at level 1 at the root (the model opens b), and again when
    the run is back at the root after its leaf (the model answers DONE): each kept fewer
    than two levels, a failed draft. With a budget of one, the second is never drafted."""
    tree = build_tree(DEEP_CATALOG)
    reference = run(tree, deep_engine(), None)
    fast = deep_engine()
    state = run(tree, fast, FixedDrafter(["a/a1/a1x"]), max_failed_drafts=budget)
    assert decisions(state) == decisions(reference)
    assert fast.verify_calls == verifications


@pytest.mark.parametrize("error", [
    ContextOverflowError("prompt needs 9000 tokens; the model's context holds 8192"),
    PathLayoutError("level 1's prompt does not extend level 0's"),
])
def test_a_draft_the_engine_cannot_verify_falls_back_without_failing_the_run(
        error: Exception) -> None:
    """A drafted level past the context (step-by-step routing may never go there) or a
    prompt that is not append-only must not fail the run."""
    tree = build_tree(DEEP_CATALOG)

    class Refusing(HashEngine):
        def verify_path(self, levels: Sequence[PathLevel]) -> list[MenuResult]:
            self.verify_calls += 1
            raise error

    engine = Refusing(prefer={"a": "b", "b1": "b1", "b1x": "b1x", "deep": "deep"})
    state = run(tree, engine, FixedDrafter(["b/b1/b1x/deep"]))
    assert decisions(state) == decisions(run(tree, deep_engine(), None))
    assert engine.verify_calls >= 1 and speculation_marks(state) == []


def test_a_near_tie_falls_back_to_step_by_step_at_that_level() -> None:
    tree = build_tree(DEEP_CATALOG)
    reference = run(tree, deep_engine(), None)
    fast = deep_engine(tight={"b1x"})  # level 2's choice is too close to trust
    state = run(tree, fast, FixedDrafter(["b/b1/b1x/deep"]))
    assert decisions(state) == decisions(reference)
    marks = speculation_marks(state)
    assert [(m["level"], m["accepted"]) for m in marks[:2]] == [(0, True), (1, True)]
    assert state.usage.speculated_levels >= 4
    assert fast.choose_calls >= 1  # b1's menu was asked step by step


def test_a_near_tie_at_the_first_level_counts_the_wasted_pass() -> None:
    tree = build_tree(DEEP_CATALOG)
    reference = run(tree, deep_engine(), None)
    fast = deep_engine(tight={"b"})
    state = run(tree, fast, FixedDrafter(["b/b1/b1x/deep"]))
    assert decisions(state) == decisions(reference)
    first = next(e for e in state.trace if e.kind.value == "route")
    assert first.detail["speculation"]["fallback"] == "margin"
    assert first.usage is not None and first.usage["forward_passes"] == 2  # wasted + real


def test_a_limit_the_prediction_did_not_model_costs_only_the_speculation() -> None:
    """max_depth refuses the push the draft predicted: the waiting decisions are dropped."""
    tree = build_tree(DEEP_CATALOG)
    limits = Limits(max_steps=40, max_depth=2)
    reference = run(tree, deep_engine(), None, limits=limits)
    state = run(tree, deep_engine(), FixedDrafter(["b/b1/b1x/deep"]), limits=limits)
    assert decisions(state) == decisions(reference)
    assert any(e.kind.value == "limit" for e in state.trace)


@pytest.mark.parametrize("seed", range(40))
def test_random_drafts_never_change_a_decision(seed: int) -> None:
    tree = build_tree(DEEP_CATALOG)
    leaves = [leaf.path_str for leaf in tree.leaves()]
    paths = [leaves[(_h(seed, i) % len(leaves))] for i in range(3)]
    engine_prefs = {"a": ["a", "b"][seed % 2]}
    reference = run(tree, HashEngine(prefer=engine_prefs), None, task=f"t{seed}")
    state = run(tree, HashEngine(prefer=engine_prefs), FixedDrafter(paths), task=f"t{seed}")
    assert decisions(state) == decisions(reference)


def test_route_cache_drafts_the_route_taken_for_the_same_or_a_similar_request() -> None:
    tree = build_tree(DEEP_CATALOG)
    cache = RouteCache(WordEmbedder(), min_similarity=0.8)
    first = run(tree, deep_engine(), cache, task="do the deep thing")
    assert [c["path"] for c in first.calls] == ["b/b1/b1x/deep"] and len(cache) == 1
    assert speculation_marks(first) == []  # nothing cached yet: step by step
    again = run(tree, deep_engine(), cache, task="do the deep thing")
    assert {m["source"] for m in speculation_marks(again)} == {"routes"}
    assert again.usage.accepted_levels == 4
    similar = run(tree, deep_engine(), cache, task="Do the deep thing!")  # nearest neighbour
    assert similar.usage.accepted_levels == 4
    unrelated = run(tree, deep_engine(), cache, task="pay bill")
    assert unrelated.usage.speculated_levels == 0


def test_the_options_describe_themselves() -> None:
    from stackroute.server.routing.recovery import RecoveryOptions

    guided = RouterOptions(recovery=RecoveryOptions.off(), speculation=DraftSource.EVIDENCE,
                           calibration="m.json")
    assert guided.describe() == {"policy": "guided", "calibration": "m.json",
                                 "speculation": "evidence", "unwinding": "off"}
    plain = RouterOptions(recovery=None, speculation=DraftSource.EVIDENCE)
    assert plain.describe() == {"policy": "plain", "calibration": None,
                                "speculation": "evidence", "unwinding": "off"}


def test_an_engine_without_path_verification_routes_step_by_step() -> None:
    tree = build_tree(DEEP_CATALOG)

    class StepOnly(HashEngine):
        verify_path = None  # type: ignore[assignment]

    engine = StepOnly(prefer={"a": "b", "b1": "b1", "b1x": "b1x", "deep": "deep"})
    state = run(tree, engine, FixedDrafter(["b/b1/b1x/deep"]))
    assert decisions(state) == decisions(run(tree, deep_engine(), None))
    assert speculation_marks(state) == []


# -- tier b: the real model ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def spec_tree() -> CapabilityTree:
    from stackroute.bench.workloads.generate import generate_suite

    return build_tree(generate_suite("scale-up", num_leaves=32, seed=3).catalog)


def _machine(tree: CapabilityTree, engine: Any, source: DraftSource,
             route_cache: RouteCache | None = None, embedder: Any = None) -> StackMachine:
    return build_machine(tree, engine, options=RouterOptions(recovery=None, speculation=source,
                                                            max_argument_tokens=24),
                         route_cache=route_cache, embedder=embedder,
                         limits=Limits(max_steps=3))  # enough to reach a leaf from a top branch


def _run_at(machine: StackMachine, task: str, at: str) -> RunState:
    machine.clock = lambda: 0.0
    state = machine.start(task, run_id="real", at=at)
    return machine.run(state)


@pytest.fixture(scope="module")
def embedder() -> Any:
    from stackroute.server.embeddings.embedder import Embedder

    return Embedder()


@pytest.mark.model
def test_real_model_one_pass_decides_as_step_by_step(engine: Any, spec_tree: CapabilityTree,
                                                    embedder: Any) -> None:
    """Evidence drafts (right or wrong) never change the real model's decisions or traces,
    probabilities included up to float rounding."""
    from stackroute.server.engines.transformers_engine import TransformersEngine

    plain_engine = TransformersEngine(loaded=engine.loaded)
    fast_engine = TransformersEngine(loaded=engine.loaded)
    tops = [n.name for n in spec_tree.root.children if not n.is_leaf][:2]
    leaves = [leaf for leaf in spec_tree.leaves() if leaf.depth >= 3][:2]
    speculated = 0
    for top, leaf in zip(tops, leaves, strict=True):
        task = leaf.description
        plain = _run_at(_machine(spec_tree, plain_engine, DraftSource.OFF), task, top)
        fast = _run_at(_machine(spec_tree, fast_engine, DraftSource.EVIDENCE,
                                embedder=embedder), task, top)
        assert _close_decisions(fast, plain)
        speculated += fast.usage.speculated_levels
    assert speculated > 0


@pytest.mark.model
def test_real_model_accepts_a_cached_route_whole(engine: Any, spec_tree: CapabilityTree,
                                                 embedder: Any) -> None:
    """The second run of a request drafts the route the model took the first time; every
    level is accepted and the decisions are the same, in fewer forward passes."""
    from stackroute.server.engines.transformers_engine import TransformersEngine

    cache = RouteCache(embedder)
    fast_engine = TransformersEngine(loaded=engine.loaded)
    found = None
    for top in [n.name for n in spec_tree.root.children if not n.is_leaf]:
        for leaf in [x for x in spec_tree.leaves() if x.path[0] == top][:3]:
            first = _run_at(_machine(spec_tree, fast_engine, DraftSource.ROUTES, cache),
                            leaf.description, top)
            if _straight_descent(spec_tree, first, top) >= 2:
                found = (leaf.description, top, first)
                break
        if found:
            break
    assert found, "the model never went straight from a top branch down to a leaf"
    task, top, first = found
    again = _run_at(_machine(spec_tree, fast_engine, DraftSource.ROUTES, cache), task, top)
    assert _close_decisions(again, first)
    assert again.usage.speculated_levels >= 2
    assert again.usage.accepted_levels == again.usage.speculated_levels
    assert again.usage.forward_passes < first.usage.forward_passes


def _straight_descent(tree: CapabilityTree, state: RunState, at: str) -> int:
    """Levels from `at` to the first leaf chosen if the run went straight down to it (no
    BACK, no DONE on the way), else 0: only then is the route cache's draft the model's own
    path. (Whether the leaf's arguments then validate does not matter here.)"""
    node = tree.node(tuple(at.split("/")))
    for level, event in enumerate((e for e in state.trace if e.kind.value == "route"), 1):
        child = node.child(event.decision or "")
        if child is None:
            return 0
        if child.is_leaf:
            return level
        node = child
    return 0


def _close_decisions(a: RunState, b: RunState, tol: float = 1e-4) -> bool:
    events_a = [e for e in a.trace if e.kind.value == "route"]
    events_b = [e for e in b.trace if e.kind.value == "route"]
    assert [e.decision for e in events_a] == [e.decision for e in events_b]
    assert [e.arguments for e in events_a] == [e.arguments for e in events_b]
    for x, y in zip(events_a, events_b, strict=True):
        assert x.probabilities is not None and y.probabilities is not None
        assert max(abs(x.probabilities[o] - y.probabilities[o]) for o in x.probabilities) < tol
    assert [e.kind for e in a.trace] == [e.kind for e in b.trace]
    return True



# -- the service: one speculator per catalog, shared by sessions ------------------------------
def test_sessions_share_the_catalogs_route_cache(tmp_path: Any) -> None:
    """A repeated request in a second session is verified from the route the first session
    took, through the server's per-catalog speculator; the decisions are the same."""
    from stackroute.server.engines.base import EngineInfo, PrepareStats
    from stackroute.server.routing.pool import RouterPool
    from stackroute.server.service.catalog_registry import CatalogRegistry
    from stackroute.server.service.session_options import SessionOptions
    from stackroute.server.service.sessions import SessionService
    from stackroute.server.service.store import SessionStore

    class ServedFake(HashEngine):
        info = EngineInfo(engine="fake", model="fake", max_context_tokens=1 << 20)

        def prepare(self, tree: CapabilityTree) -> PrepareStats:
            return PrepareStats(num_menus=0, num_schemas=0, compile_ms=0.0)

    engine = ServedFake(prefer={"a": "b", "b1": "b1", "b1x": "b1x", "deep": "deep"})
    store = SessionStore(tmp_path / "s.db")
    catalogs = CatalogRegistry(store, engine)  # type: ignore[arg-type]
    catalog_id = catalogs.add_text(json.dumps(DEEP_CATALOG))[0].id
    pool = RouterPool(engine, RouterOptions(recovery=None, speculation=DraftSource.ROUTES),  # type: ignore[arg-type]
                      embedder_factory=WordEmbedder)
    sessions = SessionService(store, catalogs, engine,  # type: ignore[arg-type]
                              options=SessionOptions(  # in-process, no prompt limits
                                  leaf_isolation="thread", max_menu_options=None,
                                  max_prompt_tokens=None), routers=pool)
    try:
        from session_kit import wait_for_status

        usages = []
        traces = []
        for _ in range(2):
            sid = sessions.create(catalog_id, "do the deep thing").state.run_id
            wait_for_status(store, sid)
            state = sessions.get(sid).state
            usages.append(state.usage)
            traces.append([(e.kind.value, e.path, e.decision) for e in state.trace])
        assert traces[0] == traces[1]
        assert usages[0].speculated_levels == 0
        assert usages[1].speculated_levels == usages[1].accepted_levels == 4
        assert engine.verify_calls == 1
    finally:
        sessions.close()
        store.close()


def test_the_pool_keeps_one_router_per_catalog_tree() -> None:
    from stackroute.server.routing.pool import RouterPool

    routes = RouterOptions(recovery=None, speculation=DraftSource.ROUTES)
    pool = RouterPool(deep_engine(), routes,  # type: ignore[arg-type]
                      embedder_factory=WordEmbedder, max_catalogs=2)
    first, twin, other = (build_tree(DEEP_CATALOG) for _ in range(3))
    router = pool.router(first)
    assert router.speculator is not None and pool.router(first) is router
    assert pool.router(first, is_flat=True) is not router  # the flat twin has its own
    assert pool.router(first, is_flat=True).speculator is None  # nothing to draft in one menu
    assert pool.router(twin) is not router  # same name, another upload: its own
    pool.router(other)  # a third tree: the least recently used (first) is dropped
    assert pool.router(first) is not router

    class StepOnly(HashEngine):
        verify_path = None  # type: ignore[assignment]

    assert RouterPool(StepOnly(), routes).router(first).speculator is None  # type: ignore[arg-type]
    off = RouterOptions(recovery=None, speculation=DraftSource.OFF)
    assert RouterPool(deep_engine(), off).router(first).speculator is None  # type: ignore[arg-type]


def test_the_pool_loads_no_embedder_it_would_not_use() -> None:
    """A plain router that cannot speculate (an engine without `verify_path`) needs no
    embedding model: loading one (seconds) on a session's first step delayed its 201."""
    from stackroute.server.routing.pool import RouterPool

    class StepOnly(HashEngine):
        verify_path = None  # type: ignore[assignment]

    def no_embedder() -> Any:
        raise AssertionError("the embedder was loaded")

    tree = build_tree(DEEP_CATALOG)
    pool = RouterPool(StepOnly(), RouterOptions(recovery=None, speculation=DraftSource.ROUTES),  # type: ignore[arg-type]
                      embedder_factory=no_embedder)
    pool.prepare(tree)
    assert pool.router(tree).speculator is None
