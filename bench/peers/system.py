"""The seam every system of `stackroute bench peers` fills: one small protocol, one result.

A system answers a `ModelCall` (a menu decision or an argument generation) greedily under the
call's constraint and says what it cost: forward passes and prompt tokens it ran (the rest of
the prompt came from its own prefix reuse). `prepare` compiles what a call will need (menus,
schemas) outside the timed region, as a server would at catalog load.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from stackroute.bench.peers.workload import ModelCall, WorkItem


@dataclass(frozen=True)
class CallOutcome:
    """What one system answered to one call and what that cost."""

    text: str  # the option name, or the arguments' JSON text
    forward_passes: int  # model forward calls
    prefill_tokens: int  # prompt tokens the model ran (not served from a prefix cache)
    generated_tokens: int
    finish_reason: str  # "stop" (the constraint or a stop token ended it) or "length"


class PeerSystem(Protocol):
    name: str

    def prepare(self, calls: Sequence[ModelCall]) -> None:
        """Compile every constraint `calls` will use (untimed)."""
        ...

    def run(self, call: ModelCall) -> CallOutcome:
        """The call's greedy constrained answer."""
        ...

    def clear_cache(self) -> None:
        """Forget reused prompt prefixes (after warm-up)."""
        ...


class PassCounter:
    """Counts a torch module's forward calls and the tokens fed to them, while `counting()`
    is open (a forward pre-hook: the public way to observe a module)."""

    def __init__(self, model: Any) -> None:
        self.num_passes = 0
        self.num_input_tokens = 0
        self.first_input_ids: list[int] | None = None
        self._is_on = False
        model.register_forward_pre_hook(self._hook, with_kwargs=True)

    def _hook(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if not self._is_on:
            return
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is None:
            return
        self.num_passes += 1
        self.num_input_tokens += int(ids.shape[-1])
        if self.first_input_ids is None:
            self.first_input_ids = [int(t) for t in ids.reshape(-1).tolist()]

    @contextmanager
    def counting(self) -> Iterator[PassCounter]:
        self.num_passes = self.num_input_tokens = 0
        self.first_input_ids = None
        self._is_on = True
        try:
            yield self
        finally:
            self._is_on = False


@runtime_checkable
class RequestSystem(Protocol):
    """A system that takes a request's calls together (`ours-path`): each call's outcome and
    the wall time charged to it."""

    def run_request(self, calls: Sequence[ModelCall]) -> list[tuple[CallOutcome, float]]:
        ...


@dataclass(frozen=True)
class WarmCost:
    """What warming the catalog cost one system (untimed in the request tables)."""

    latency_ms: float
    prefill_tokens: int
    forward_passes: int


@runtime_checkable
class RoutingSystem(Protocol):
    """A system that routes each user request itself (`ours-router`): its decisions are its
    own, one record per request, and it warms the catalog its own way."""

    def route(self, query: Any) -> dict[str, Any]:
        ...

    def warm_cost(self) -> WarmCost:
        ...


def timed_calls(system: PeerSystem, item: WorkItem) -> list[tuple[CallOutcome, float]]:
    """(outcome, latency_ms) per call: one call at a time, or the request at once where the
    system takes it so."""
    if item.is_request and isinstance(system, RequestSystem):
        return system.run_request(item.calls)
    out = []
    for call in item.calls:
        t = time.perf_counter()
        outcome = system.run(call)
        out.append((outcome, (time.perf_counter() - t) * 1e3))
    return out


def run_item(system: PeerSystem, item: WorkItem) -> list[dict[str, Any]]:
    """One system's answers to an item's calls, in order, each timed on its own (a request
    system's group wall time charged to the group's first call)."""
    out = []
    for index, (call, (outcome, latency_ms)) in enumerate(
            zip(item.calls, timed_calls(system, item), strict=True)):
        out.append({"item_id": item.item_id, "source": item.source,
                    "is_request": item.is_request, "call_index": index,
                    "kind": call.kind.value, "system": system.name,
                    "latency_ms": round(latency_ms, 3), "text": outcome.text,
                    "forward_passes": outcome.forward_passes,
                    "prefill_tokens": outcome.prefill_tokens,
                    "prompt_tokens": len(call.prompt_ids),
                    "generated_tokens": outcome.generated_tokens,
                    "finish_reason": outcome.finish_reason, "gold": call.gold})
    return out
