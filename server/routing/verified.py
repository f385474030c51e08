"""Decisions computed ahead of their routing calls, shared by speculative routing
(`speculator.py`: a drafted path down) and unwinding (`unwinding.py`: the DONEs up).

Both compute several levels' constrained choices in one pass and keep exactly the decisions
step-by-step routing makes (`kept_levels`); the later ones wait, per run, for the routing
calls the machine makes next and are handed out only if the machine asks exactly the
predicted request (`runtime/speculation.matches`). Anything the prediction did not model
(a limit, a resume in another process) costs the pass only.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass

from stackroute.runtime.router import RoutingRequest
from stackroute.runtime.speculation import matches
from stackroute.server.engines.base import MenuResult
from stackroute.server.routing.recovery import MenuStep

MAX_RUNS_WAITING = 1024
# The closest call a level may have and still be trusted from a long pass, by the engine's
# precision. float32: one long pass and several short ones differ by about 1e-6 in log-prob.
# bfloat16 logits are quantised (steps of 0.125 at SmolLM2's logit scale) and differed by up
# to 0.24 nats between a pass and step-by-step calls on the same prompts
# (bench/results/2026-12-03-cpu-unwind-bf16), so a closer call there goes step by step.
MIN_MARGINS = {"float32": 1e-3, "bfloat16": 0.5, "float16": 0.5}


def min_margin_for(dtype: str) -> float:
    """The trusted margin for an engine computing in `dtype` (the strictest for one not
    listed: a remote or vLLM engine, which verifies no levels anyway).

    >>> min_margin_for("float32"), min_margin_for("bfloat16"), min_margin_for("auto")
    (0.001, 0.5, 0.5)
    """
    return MIN_MARGINS.get(dtype, max(MIN_MARGINS.values()))


def trusted_margin(engine: object) -> float:
    """`min_margin_for` the engine's precision (`engine.info.dtype`; the strictest margin for
    an engine that reports none)."""
    return min_margin_for(str(getattr(getattr(engine, "info", None), "dtype", "")))


def kept_levels(results: Sequence[MenuResult], expected: Sequence[str], *,
                min_margin: float) -> list[MenuResult]:
    """The levels whose decisions are step-by-step routing's: level 0, then each next one
    while every level before it chose the `expected` answer (the first other choice is
    itself correct, like the bonus token of speculative decoding); a level whose margin is
    under `min_margin` ends the run of kept levels (one long pass and several short ones can
    round differently)."""
    kept: list[MenuResult] = []
    for result, answer in zip(results, expected, strict=False):
        if result.margin < min_margin:
            break
        kept.append(result)
        if result.choice != answer:
            break
    return kept


@dataclass
class _Waiting:
    request: RoutingRequest
    step: MenuStep


class WaitingDecisions:
    """Per run, the decisions computed for the routing calls it will make next, in order.
    Bounded to the `MAX_RUNS_WAITING` most recent runs; thread-safe."""

    def __init__(self) -> None:
        self._waiting: OrderedDict[str, deque[_Waiting]] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, run_id: str, requests: Sequence[RoutingRequest],
            steps: Sequence[MenuStep]) -> None:
        """Replace the run's waiting decisions with `steps`, each for its predicted request."""
        with self._lock:
            self._waiting.pop(run_id, None)
            if steps:
                self._waiting[run_id] = deque(
                    _Waiting(r, s) for r, s in zip(requests, steps, strict=True))
                while len(self._waiting) > MAX_RUNS_WAITING:
                    self._waiting.popitem(last=False)

    def take(self, request: RoutingRequest) -> MenuStep | None:
        """The decision waiting for exactly this request, or None (a mismatch drops the rest
        of the run's queue: the machine has left the predicted path)."""
        with self._lock:
            queue = self._waiting.get(request.run_id)
            if not queue:
                return None
            head = queue.popleft()
            if not queue:
                del self._waiting[request.run_id]
            if not matches(head.request, request):
                self._waiting.pop(request.run_id, None)
                return None
            return head.step
