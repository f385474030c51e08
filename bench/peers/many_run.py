"""The timed loop of `stackroute bench peers --workload many` (the workload: `many.py`).

Per system, untimed: its code paths once (the warm-up request's first decision and its
argument call), then its cache is cleared; then, with `WarmOnLoad.ROOT`, the catalog's warm
call (what the product runs at catalog load). Then the requests in order, every system on
each request before the next (the systems' order rotated per request, so none always goes
first), and no cache is cleared: request k+1 finds what request k (and the warming) left.
`max_run_s` stops starting requests after that long, so every system ran every request
that started.

A `RoutingSystem` (`ours-router`, `router_system.py`) takes each request whole, as a user's
request: its code paths are the warm-up request routed once, its warming its own (the
product's `warm_catalog`), and it writes one record per request.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from stackroute.bench.peers.many import ManyWorkload, WarmOnLoad
from stackroute.bench.peers.system import PeerSystem, RoutingSystem, WarmCost, run_item
from stackroute.bench.peers.workload import CallKind


@dataclass(frozen=True)
class ManyRun:
    records: list[dict[str, Any]]  # run_item's records plus `request_index` (0: the first)
    warm_costs: dict[str, WarmCost]  # per system; empty when nothing was warmed
    num_requests_run: int


def warm_code_paths(systems: Sequence[PeerSystem], workload: ManyWorkload) -> None:
    """Every system's decision and argument paths once, then its cache cleared."""
    calls = workload.code_warm_up.calls
    firsts = [next(c for c in calls if c.kind is kind) for kind in CallKind
              if any(c.kind is kind for c in calls)]
    for system in systems:
        if isinstance(system, RoutingSystem):
            system.route(workload.queries[-1])
        else:
            for call in firsts:
                system.run(call)
        system.clear_cache()


def warm_catalog(systems: Sequence[PeerSystem], workload: ManyWorkload) -> dict[str, WarmCost]:
    """The catalog's warm call on every system (its answer is not scored)."""
    costs = {}
    for system in systems:
        costs[system.name] = _warm(system, workload)
    return costs


def _warm(system: PeerSystem, workload: ManyWorkload) -> WarmCost:
    """What warming cost one system: a routing system's own (the product's `warm_catalog`
    for `ours-router`), the workload's warm call for the others."""
    if isinstance(system, RoutingSystem):
        return system.warm_cost()
    t = time.perf_counter()
    outcome = system.run(workload.warm_call)
    return WarmCost(latency_ms=round((time.perf_counter() - t) * 1e3, 3),
                    prefill_tokens=outcome.prefill_tokens, forward_passes=outcome.forward_passes)


def _request_records(system: PeerSystem, workload: ManyWorkload, k: int) -> list[dict[str, Any]]:
    """Request k's records from one system: one whole-request record from a routing system
    (`ours-router`), one per teacher-forced call from the others."""
    if isinstance(system, RoutingSystem):
        records = [system.route(workload.queries[k])]
    else:
        records = run_item(system, workload.requests[k])
    return [{**r, "request_index": k} for r in records]


def run_many(systems: Sequence[PeerSystem], workload: ManyWorkload, *,
             warm: WarmOnLoad = WarmOnLoad.ROOT, max_run_s: float | None = None) -> ManyRun:
    """The workload's requests through every system, caches kept across requests."""
    warm_code_paths(systems, workload)
    warm_costs = warm_catalog(systems, workload) if warm is WarmOnLoad.ROOT else {}
    records: list[dict[str, Any]] = []
    timed_from = time.perf_counter()
    num_run = 0
    for k in range(len(workload.requests)):
        if max_run_s is not None and time.perf_counter() - timed_from > max_run_s:
            break
        num_run += 1
        order = list(systems[k % len(systems):]) + list(systems[:k % len(systems)])
        for system in order:
            records.extend(_request_records(system, workload, k))
    return ManyRun(records=records, warm_costs=warm_costs, num_requests_run=num_run)
