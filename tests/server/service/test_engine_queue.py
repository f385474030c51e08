"""EngineQueue admission control, without a server: slots, the bounded wait, cancellation."""

from __future__ import annotations

import threading

import anyio
import pytest
from stackroute.server.service.engine_queue import EngineQueue, QueueFullError


def test_waits_up_to_max_queue_then_refuses_and_recovers() -> None:
    queue = EngineQueue(max_queue=1, max_concurrency=1)
    gate = threading.Event()
    results: list[str] = []

    async def main() -> None:
        async def call(name: str) -> None:
            results.append(await queue.run(lambda: gate.wait(10) and name))

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(call, "first")
            while queue.num_running == 0:
                await anyio.sleep(0.01)
            tasks.start_soon(call, "second")
            while queue.num_waiting == 0:
                await anyio.sleep(0.01)
            with pytest.raises(QueueFullError) as refused:
                await queue.run(lambda: "third")
            assert refused.value.retry_after_s >= 1 and refused.value.num_waiting == 1
            gate.set()
        assert (queue.num_waiting, queue.num_running, queue.num_rejected) == (0, 0, 1)
        assert await queue.run(lambda: "after") == "after"

    anyio.run(main)
    assert results == ["first", "second"]


def test_a_waiter_cancelled_leaves_the_queue() -> None:
    queue = EngineQueue(max_queue=4, max_concurrency=1)
    gate = threading.Event()

    async def main() -> None:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(queue.run, lambda: gate.wait(10))
            while queue.num_running == 0:
                await anyio.sleep(0.01)
            with anyio.move_on_after(0.1):
                await queue.run(lambda: None)  # waits for the slot, then is cancelled
            assert queue.num_waiting == 0
            gate.set()

    anyio.run(main)


def test_errors_in_the_call_propagate_and_free_the_slot() -> None:
    queue = EngineQueue(max_queue=0, max_concurrency=1)

    def boom() -> None:
        raise ValueError("engine failed")

    async def main() -> None:
        with pytest.raises(ValueError, match="engine failed"):
            await queue.run(boom)
        assert await queue.run(lambda: 7) == 7

    anyio.run(main)
