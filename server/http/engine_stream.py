"""A blocking engine call's streamed items, carried from its worker thread to the event loop.

Engine calls block (`engine_queue.py` runs them in worker threads, one queue slot each), and
`Engine.generate_stream` hands its deltas to a callback on the engine's own thread. `stream_call`
runs such a call in a queue slot and gives the items it sends as an async iterator, as they
are sent; the call's return value comes last, as `Finished`. An error the call raises comes
out of the iterator where it happened, so a route can still answer an error that comes before
the first item with its HTTP status.

When the consumer stops early (the client went away), the next item the call sends raises
`StreamClosedError` on the engine's thread, which stops the generation there: the queue slot
and the engine are freed within one decode step instead of after the whole answer.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from stackroute.server.service.engine_queue import EngineQueue

T = TypeVar("T")
R = TypeVar("R")


class StreamClosedError(Exception):
    """Raised in the engine's thread by `send` once nobody reads the stream any more."""


@dataclass(frozen=True)
class Finished(Generic[R]):
    """The last item of a `stream_call`: what the call returned."""

    result: R


async def stream_call(queue: EngineQueue, call: Callable[[Callable[[T], None]], R],
                      ) -> AsyncGenerator[T | Finished[R], None]:
    """Run `call(send)` in a queue slot; yield each item it sends, then `Finished(result)`."""
    loop = asyncio.get_running_loop()
    items: asyncio.Queue[T] = asyncio.Queue()
    is_closed = threading.Event()

    def send(item: T) -> None:  # the engine's thread
        if is_closed.is_set():
            raise StreamClosedError("the client stopped reading the stream")
        loop.call_soon_threadsafe(items.put_nowait, item)

    # Items are queued with call_soon_threadsafe from the worker thread before it hands back
    # its result the same way, so once the task is done every item is already in `items`.
    task = asyncio.ensure_future(queue.run(lambda: call(send)))
    getter: asyncio.Future[T] | None = None
    try:
        while not task.done():
            getter = asyncio.ensure_future(items.get())
            await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
            if getter.done():
                yield getter.result()
            else:
                getter.cancel()
        while not items.empty():
            yield items.get_nowait()
        yield Finished(task.result())  # raises the call's error
    finally:
        is_closed.set()
        if getter is not None and not getter.done():  # cancelled while waiting
            getter.cancel()
        if not task.done():  # the worker thread runs on until its next send; then it stops
            task.add_done_callback(_consume_error)


def _consume_error(task: asyncio.Future[object]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved: an abandoned stream's StreamClosedError is expected
