"""`ours-router` in `stackroute bench peers --workload many`: the product itself, per request.

The other systems answer the workload's teacher-forced calls (every routing call down the gold
route, the leaf's argument generation, the `DONE` calls back up): the cost of the paper's
protocol on each engine, at identical token work. `ours-router` is what a user of stackroute
gets for the same request, on the same catalog, model and thread count: the product's default
router (`RouterPool` with the model's calibration: guided by the leaf evidence, arguments
chosen from the request's own values, `DONE` by the finish rule where the request is served),
kept for the whole run as the service keeps it, the catalog warmed on load as the service
warms it (`warm_catalog`, the settings' default scope), each request run to its end with
every gate approved (`evaluate.run_query`, as `stackroute eval` runs it).

Its decisions are its own, not the gold's, so its record says whether its calls are the gold
route (`success`) and the gold call (`args_success`): its speed is read beside its accuracy.
A request's wall time is all of it: embedding the request, the evidence, every model call and
every step of the machine.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from stackroute.bench.peers.system import CallOutcome, WarmCost
from stackroute.bench.peers.workload import ModelCall
from stackroute.runtime.tree import CapabilityTree
from stackroute.server.engines.registry import create_engine
from stackroute.server.routing.pool import RouterPool
from stackroute.server.routing.prefix_warming import WarmReport, warm_catalog
from stackroute.server.tools.evaluate import Query, run_query, score

NAME = "ours-router"


class RouterSystem:
    """The product's router over one catalog, on the embedded engine (its own prefix cache)."""

    name = NAME

    def __init__(self, loaded: Any, tree: CapabilityTree) -> None:
        self.engine: Any = create_engine("transformers", loaded=loaded)
        self.tree = tree
        self.pool = self._new_pool()

    def _new_pool(self) -> RouterPool:
        pool = RouterPool(self.engine)
        pool.prepare(self.tree)  # the leaf index: built at catalog load, untimed
        return pool

    def prepare(self, calls: Sequence[ModelCall]) -> None:
        """Nothing to compile ahead: the router compiles its menus as it meets them (in the
        timed region, as in the service)."""

    def run(self, call: ModelCall) -> CallOutcome:
        raise TypeError(f"{NAME} routes whole requests (`route`); it answers no "
                        "teacher-forced call")

    def clear_cache(self) -> None:
        """Forget everything a request left: the engine's prefix cache and the router (its
        route cache, compiled menus and contrasts), as a freshly started service."""
        self.engine.cache.clear()
        self.pool = self._new_pool()

    def warm(self) -> WarmReport:
        """The catalog load's warming, as the service runs it."""
        return warm_catalog(self.pool, self.tree)

    def warm_cost(self) -> WarmCost:
        report = self.warm()
        return WarmCost(latency_ms=round(report.wall_ms, 3),
                        prefill_tokens=report.usage.prefill_tokens,
                        forward_passes=report.usage.forward_passes)

    def route(self, query: Query) -> dict[str, Any]:
        """One request end to end: its record (`many_tables.request_row` reads it as a whole
        request of one line)."""
        started = time.perf_counter()
        state = run_query(self.pool.machine(self.tree), query)
        wall_ms = (time.perf_counter() - started) * 1e3
        result = score(self.tree, query, state, wall_ms=wall_ms)
        usage = state.usage
        return {"item_id": query.id, "system": self.name, "kind": "request",
                "is_request": True, "call_index": 0, "latency_ms": round(wall_ms, 3),
                "text": list(result.called), "gold": list(query.gold),
                "arguments": [dict(a) for a in result.arguments],
                "success": result.is_success, "args_success": result.is_args_success,
                "outcome": result.outcome, "model_calls": usage.model_calls,
                "forward_passes": usage.forward_passes, "prefill_tokens": usage.prefill_tokens,
                "prompt_tokens": usage.prompt_tokens,
                "generated_tokens": usage.generated_tokens}
