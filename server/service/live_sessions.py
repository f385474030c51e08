"""The sessions an instance holds in memory, and which of them have a worker.

A `LiveSession` is a session's state, its machine, the lease it was claimed under (`fence`)
and the lock that orders its transitions. `LiveSessions` is the cache of them plus the set of
sessions with a worker job queued or running (`active`). Lock order: a session's own lock
first, then the cache's, never the other way round.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from stackroute.runtime.machine import StackMachine
from stackroute.runtime.state import RunState
from stackroute.server.service.store_executor import Fence
from stackroute.server.service.store_records import SessionRow


@dataclass(eq=False)
class LiveSession:
    """A session in memory: its state, its machine, and the lock that orders its transitions."""

    row: SessionRow
    state: RunState
    machine: StackMachine
    num_saved: int  # trace events already in the store
    fence: Fence  # the lease this instance holds on the session (token 0: an embedded store)
    is_dirty: bool = False  # a transition is made in memory but not saved yet
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def session_id(self) -> str:
        return self.state.run_id


class LiveSessions:
    """Thread-safe. `is_closing` is set once, at shutdown: no worker starts after it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: dict[str, LiveSession] = {}
        self._active: set[str] = set()
        self._is_closing = False

    @property
    def is_closing(self) -> bool:
        with self._lock:
            return self._is_closing

    def close(self) -> list[LiveSession]:
        """No worker starts from now on; the sessions held (to release their leases)."""
        with self._lock:
            self._is_closing = True
            return list(self._live.values())

    def num_active(self) -> int:
        with self._lock:
            return len(self._active)

    def is_active(self, session_id: str) -> bool:
        with self._lock:
            return session_id in self._active

    def lookup(self, session_id: str) -> tuple[LiveSession | None, bool]:
        """The session in memory (or None) and whether a worker of this instance holds it."""
        with self._lock:
            return self._live.get(session_id), session_id in self._active

    def add(self, live: LiveSession) -> None:
        with self._lock:
            self._live[live.session_id] = live

    def adopt(self, live: LiveSession) -> LiveSession:
        """Hold a session just loaded under a claim. When this instance's worker holds it
        already, keep the worker's copy (its memory may be ahead of the store, a transition
        not saved yet) under the new claim's token."""
        with self._lock:
            kept = self._live.get(live.session_id)
            if kept is not None and live.session_id in self._active:
                kept.fence.token = live.fence.token
                return kept
            self._live[live.session_id] = live
            return live

    def forget(self, session_id: str) -> None:
        with self._lock:
            self._live.pop(session_id, None)

    def activate(self, session_id: str) -> bool:
        """Mark the session as having a worker; False when it has one or the service is
        closing (then no worker is started)."""
        with self._lock:
            if self._is_closing or session_id in self._active:
                return False
            self._active.add(session_id)
            return True

    def deactivate(self, session_id: str, *, is_forgotten: bool) -> LiveSession | None:
        """The worker lets go of the session (and memory of it, `is_forgotten`); returns
        what memory held."""
        with self._lock:
            self._active.discard(session_id)
            if is_forgotten:
                return self._live.pop(session_id, None)
            return self._live.get(session_id)
