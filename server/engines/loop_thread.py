"""A private asyncio event loop on a daemon thread, for synchronous callers of an async engine.

Why the vLLM engine needs one: the engine protocol is synchronous, but the server calls it from
many threads at once. vLLM's `LLM.generate` is neither thread-safe nor able to take requests
while it runs, so concurrent callers would serialise. `AsyncLLM` runs the engine core in its
own process with continuous batching; the engine keeps one `LoopThread`, and each protocol call
submits its coroutine to that loop and waits. Callers in different threads land in the same
batches.

>>> loop = LoopThread(name="doctest-loop")
>>> async def answer() -> int:
...     return 42
>>> loop.call(answer(), timeout_s=5)
42
>>> loop.stop()
>>> loop.close()
>>> loop.is_closed
True
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    def __init__(self, *, name: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name=name)
        self._thread.start()

    @property
    def is_closed(self) -> bool:
        return self._loop.is_closed()

    def call(self, coroutine: Coroutine[Any, Any, T], *, timeout_s: float | None) -> T:
        """Run `coroutine` on the loop from any thread and wait for its result (None: no
        time limit)."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        return future.result(timeout=timeout_s)

    def stop(self) -> None:
        """Stop the loop and its thread; what is still scheduled on it stays pending."""
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)

    def close(self) -> None:
        """After `stop()`: cancel what is left on the loop, here, and close it."""
        pending = asyncio.all_tasks(self._loop)
        for task in pending:
            task.cancel()
        if pending:  # gather() of nothing would belong to the caller's loop, not this one
            self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self._loop.close()
