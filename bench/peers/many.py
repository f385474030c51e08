"""`stackroute bench peers --workload many`: many requests on one catalog, caches kept.

The workload is the single-tool queries of one generated catalog (scale-up, the cache suite's
catalogs; 128 tools by default: a four-level tree, nine model calls per request), each
teacher-forced along its gold route by the real `StackMachine` (`workload.route_calls`), so
every system reads the same token ids. Prompts are in the product's prompt order
(`PromptOrder.MENU_FIRST`, `runtime/prompt.py`): the system text and the root's menu come
before the request, so every request on the catalog opens with the same tokens
(`ManyWorkload.num_shared_tokens`).

Nothing is cleared between requests: each system keeps what it can carry (`CARRIES_CACHE`).
Warming on load (`--warm root`, the default) runs, for every system and untimed, the call the
product's `warm_catalog` makes for a plain router: the root's menu with the neutral request,
so the shared header's KV is in each system's cache before the first timed request (a system
that cannot keep a cache gains nothing from it). The first timed request is reported apart
from the second and later (`many_tables.py`). One more request of the catalog, never timed,
warms each system's code paths first (then its cache is cleared).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from stackroute.bench.peers.workload import (
    MAX_ARGUMENT_TOKENS,
    REQUEST_SUITE,
    CallKind,
    ModelCall,
    WorkItem,
    render_call,
    route_calls,
)
from stackroute.bench.workloads.generate import generate_suite
from stackroute.runtime.catalog import build_tree
from stackroute.runtime.decision import Decision
from stackroute.runtime.machine import StackMachine
from stackroute.runtime.prompt import PromptLayout, PromptOrder
from stackroute.runtime.router import RoutingRequest
from stackroute.runtime.tree import CapabilityTree
from stackroute.server.routing.contrast import NEUTRAL_REQUEST
from stackroute.server.tools.evaluate import Query

MANY_LEAVES = 128  # the cache suite's middle catalog: the default of `--workload many`
SMOKE_REQUESTS = 2  # the first (reported apart) and one later request

# Whether each system carries a prompt's KV from one request to the next, and how.
CARRIES_CACHE = {
    "ours": "yes: the engine's prefix cache (a radix tree over token ids, LRU, bounded by "
            "bytes), never cleared between requests",
    "ours-path": "yes: as ours (the same engine, a request's descent and unwind each in one "
                 "pass)",
    "xgrammar": "yes: one KV slot cropped to its longest common prefix with the next prompt "
                "(our hand-built loop; what a careful user of transformers + xgrammar "
                "writes), never cleared between requests",
    "outlines": "no: each call runs transformers' generate from an empty cache (outlines "
                "keeps no KV between calls)",
    "llama.cpp": "yes: llama-cpp-python's slot reuses its longest common prefix with the "
                 "next prompt",
    "ours-router": "yes: as ours; and the product's router, kept for the whole run as the "
                   "service keeps it (its route cache, compiled menus and contrasts)",
}


class WarmOnLoad(StrEnum):
    """What each system computes before the first timed request (untimed, for all alike)."""

    NONE = "none"  # the first request prefills the shared header itself
    ROOT = "root"  # the root menu's neutral call: `warm_catalog` for a plain router


@dataclass(frozen=True)
class ManyWorkload:
    catalog: str  # "scale-up-128"
    requests: tuple[WorkItem, ...]  # timed, in order; nothing cleared between them
    code_warm_up: WorkItem  # one more request of the catalog: code paths, untimed
    warm_call: ModelCall  # the root menu with the neutral request (warm on load)
    num_shared_tokens: int  # tokens every request's first prompt starts with
    tree: CapabilityTree  # the catalog, for a system that routes the requests itself
    queries: tuple[Query, ...]  # the requests as queries (`requests`' order), then the warm-up


class _Unused:
    """A router the warm prompt's machine is never asked to call."""

    def route(self, request: RoutingRequest) -> Decision:
        raise RuntimeError("the warm-up prompt is rendered, never routed")


def warm_call(render: Any, tree: CapabilityTree) -> ModelCall:
    """The root's routing call for the neutral request: what the product's `warm_catalog`
    sends a plain router's engine at catalog load."""
    machine = StackMachine(tree, _Unused())
    request = machine.request_for(machine.start(NEUTRAL_REQUEST, run_id="warm-on-load"))
    return render_call(render, CallKind.DECISION, request.prompt, options=request.menu.options)


def common_prefix(ids: Sequence[Sequence[int]]) -> int:
    """How many leading ids every sequence shares.

    >>> common_prefix([[1, 2, 3], [1, 2, 4], [1, 2]])
    2
    """
    if not ids:
        return 0
    n = min(len(i) for i in ids)
    for k in range(n):
        if len({i[k] for i in ids}) > 1:
            return k
    return n


def many_workload(render: Any, *, num_leaves: int = MANY_LEAVES, num_requests: int,
                  seed: int = 0,
                  max_argument_tokens: int = MAX_ARGUMENT_TOKENS) -> ManyWorkload:
    """The first `num_requests` single-tool queries of scale-up at `num_leaves` (and one more,
    the code paths' warm-up), in the product's prompt order. `render` is a `ChatRenderer`."""
    generated = generate_suite(REQUEST_SUITE, num_leaves=num_leaves, seed=seed)
    tree = build_tree(generated.catalog)
    if PromptLayout(tree).style.order is not PromptOrder.MENU_FIRST:
        raise RuntimeError("the product's prompt order is no longer menu-first: this "
                           "workload's premise (a header shared by every request) needs a look")
    queries = [q for q in generated.queries if len(q["gold"]) == 1]
    if len(queries) < num_requests + 1:
        raise ValueError(f"scale-up at {num_leaves} tools has {len(queries)} single-tool "
                         f"queries; {num_requests} requests and a warm-up need "
                         f"{num_requests + 1}")
    catalog = f"{REQUEST_SUITE}-{num_leaves}"
    chosen = queries[:num_requests + 1]
    items = [WorkItem(item_id=q["id"], source=catalog, calls=tuple(route_calls(
        render, tree, q["query"], q["gold"][0], q["args"][0],
        max_argument_tokens=max_argument_tokens))) for q in chosen]
    return ManyWorkload(catalog=catalog, requests=tuple(items[:num_requests]),
                        code_warm_up=items[num_requests], warm_call=warm_call(render, tree),
                        num_shared_tokens=common_prefix(
                            [i.calls[0].prompt_ids for i in items]),
                        tree=tree, queries=tuple(Query.from_record(q) for q in chosen))
