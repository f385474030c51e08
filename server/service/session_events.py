"""A session's transitions as a stream: watchers woken after each saved transition, reading
the store (so a watcher sees exactly what is durable). The wake-up comes from this instance's
worker, or over a shared store from the database (`LISTEN`: a transition saved by another
instance), with a poll every `poll_s` as the safety net."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

from stackroute.runtime.errors import InputError
from stackroute.runtime.governance import RunStatus
from stackroute.server.service.store_protocol import StoreBackend
from stackroute.server.service.store_records import SessionRow


class UnknownSessionError(InputError):
    code = "unknown_session"
    http_status = 404


@dataclass(frozen=True)
class StreamEnd:
    """The last item of a session's event stream: it is no longer running."""

    status: RunStatus


StreamItem = dict[str, Any] | StreamEnd  # a transition (a trace event as a dict), or the end


@dataclass(eq=False)
class _Waiter:
    loop: asyncio.AbstractEventLoop
    event: asyncio.Event


class SessionWatchers:
    def __init__(self, store: StoreBackend, *, poll_s: float = 1.0) -> None:
        self.store = store
        self.poll_s = poll_s  # a watcher re-reads the store at least this often
        self._lock = threading.Lock()
        self._waiters: dict[str, set[_Waiter]] = {}

    def notify(self, session_id: str) -> None:
        """Wake the session's watchers (from any thread)."""
        with self._lock:
            waiters = list(self._waiters.get(session_id, ()))
        for waiter in waiters:
            with contextlib.suppress(RuntimeError):  # the watcher's event loop has closed
                waiter.loop.call_soon_threadsafe(waiter.event.set)

    async def watch(self, session_id: str, after_seq: int) -> AsyncGenerator[StreamItem, None]:
        """The transitions with `seq > after_seq` as they are saved, then a `StreamEnd`."""
        waiter = _Waiter(asyncio.get_running_loop(), asyncio.Event())
        with self._lock:
            self._waiters.setdefault(session_id, set()).add(waiter)
        try:
            last_seq = after_seq
            while True:
                waiter.event.clear()
                # Status first, then events: everything saved before a final status is read.
                row = await asyncio.to_thread(self.row, session_id)
                events = await asyncio.to_thread(self.store.transitions, session_id,
                                                 after_seq=last_seq)
                for event in events:
                    yield event
                    last_seq = event["seq"]
                if row.status is not RunStatus.RUNNING:
                    yield StreamEnd(row.status)
                    return
                # Woken by a saved transition, or the poll interval as a safety net.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(waiter.event.wait(), self.poll_s)
        finally:
            with self._lock:
                waiters = self._waiters.get(session_id)
                if waiters is not None:
                    waiters.discard(waiter)
                    if not waiters:
                        del self._waiters[session_id]

    def row(self, session_id: str) -> SessionRow:
        row = self.store.session_row(session_id)
        if row is None:
            raise UnknownSessionError(f"no session {session_id!r}")
        return row
