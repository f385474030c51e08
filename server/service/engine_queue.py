"""Admission control in front of the engine.

Model steps are blocking calls (the CPU engine even serialises them behind its own lock), so
every engine call runs in a worker thread and the event loop never waits on one. At most
`max_concurrency` calls are handed to the engine at once (a batching engine serves them
together; the CPU engine queues them on its lock); up to `max_queue` more wait here, and
anything beyond that is refused at once with `QueueFullError` (HTTP 429 with Retry-After)
instead of growing memory without bound.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TypeVar

import anyio
import anyio.to_thread
from stackroute.runtime.errors import StackrouteError

T = TypeVar("T")

_EWMA_WEIGHT = 0.2  # weight of the newest call in the service-time estimate
_MAX_RETRY_AFTER_S = 60


class QueueFullError(StackrouteError):
    """Too many requests are already waiting for the engine; retry after `retry_after_s`."""

    code = "queue_full"

    def __init__(self, *, num_waiting: int, retry_after_s: int) -> None:
        self.num_waiting = num_waiting
        self.retry_after_s = retry_after_s
        super().__init__(f"the engine queue is full ({num_waiting} requests waiting); "
                         f"retry after {retry_after_s} s")


class EngineQueue:
    """Run blocking engine calls in worker threads, with a bounded wait queue.

    Counters are touched only on the event loop's thread, so they need no lock.
    """

    def __init__(self, *, max_queue: int, max_concurrency: int) -> None:
        self.max_queue = max_queue
        self.max_concurrency = max_concurrency
        self._slots = anyio.CapacityLimiter(max_concurrency)
        # The worker threads' own limiter: never contended (the slots above gate first), it
        # only keeps engine calls off anyio's shared default thread pool.
        self._threads = anyio.CapacityLimiter(max_concurrency)
        self.num_waiting = 0
        self.num_running = 0
        self.num_rejected = 0
        self._service_s = 1.0  # running estimate of one call's duration, seconds

    async def run(self, call: Callable[[], T]) -> T:
        """`call()` in a worker thread once a slot is free; QueueFullError when too many wait."""
        if self._slots.available_tokens == 0 and self.num_waiting >= self.max_queue:
            self.num_rejected += 1
            raise QueueFullError(num_waiting=self.num_waiting, retry_after_s=self.retry_after_s)
        self.num_waiting += 1
        is_waiting = True
        try:
            async with self._slots:
                self.num_waiting -= 1
                is_waiting = False
                self.num_running += 1
                started = time.perf_counter()
                try:
                    return await anyio.to_thread.run_sync(call, limiter=self._threads)
                finally:
                    self.num_running -= 1
                    elapsed = time.perf_counter() - started
                    self._service_s += _EWMA_WEIGHT * (elapsed - self._service_s)
        finally:
            if is_waiting:  # cancelled while waiting (the client went away)
                self.num_waiting -= 1

    @property
    def retry_after_s(self) -> int:
        """Seconds until the queue has likely drained by one request: whole seconds, 1..60."""
        rounds = (self.num_waiting + 1) / self.max_concurrency
        return max(1, min(_MAX_RETRY_AFTER_S, math.ceil(rounds * self._service_s)))
