"""Leaf calls run at most once per call id, across crashes: the session service's executor.

The call is recorded as begun (committed) before the handler runs and its outcome
(committed) before it is returned, so a resumed run meets its own record instead of running
the tool again.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from stackroute.runtime.handlers import Executor, LeafOutcome
from stackroute.runtime.state import arguments_digest
from stackroute.runtime.tree import Node
from stackroute.server.service.store_records import storable_text, strict_json

if TYPE_CHECKING:
    from stackroute.server.service.store_protocol import StoreBackend


@dataclass(eq=False)
class Fence:
    """A session's lease as its worker holds it: the begun-record of a leaf call is written
    only while `token` is still the session's (a shared store checks it in the same
    transaction), so an instance whose lease was taken over never starts a handler."""

    session_id: str
    token: int


class FencedExecutor:
    """The executor one session's machine uses: `StoreExecutor` under the session's fence."""

    def __init__(self, inner: StoreExecutor, fence: Fence) -> None:
        self.inner = inner
        self.fence = fence

    def execute(self, leaf: Node, arguments: Mapping[str, Any], call_id: str) -> LeafOutcome:
        return self.inner.execute(leaf, arguments, call_id, fence=self.fence)


class StoreExecutor:
    """An executor that runs each leaf call at most once, by its call id, across crashes.

    The call is recorded as begun (committed) before the handler runs and its outcome
    (committed) before it is returned. Meeting a recorded call id again returns the recorded
    outcome; a call begun but never finished (the process died inside the handler) is not run
    again either: it reports an error, because the handler may already have acted.

    When the store cannot take the outcome (another process holds the database's lock past
    the busy timeout), the outcome is kept here as "ran, not yet saved" and the store's error
    is raised: the session worker retries the step, and the retry saves the kept outcome
    instead of running the handler again. The same goes for a failed "begun" record, before
    the handler ran.
    """

    def __init__(self, store: StoreBackend, inner: Executor) -> None:
        self.store = store
        self.inner = inner
        self._unsaved: dict[str, LeafOutcome] = {}  # call id -> outcome the store lacks
        self._lock = threading.Lock()

    def execute(self, leaf: Node, arguments: Mapping[str, Any], call_id: str, *,
                fence: Fence | None = None) -> LeafOutcome:
        with self._lock:
            unsaved = self._unsaved.get(call_id)
        if unsaved is not None:  # it ran: save what it did (raises while the store cannot)
            self.store.finish_leaf(call_id, result=unsaved.result, error=unsaved.error)
            with self._lock:
                self._unsaved.pop(call_id, None)
            return unsaved
        digest = arguments_digest(leaf.path_str, dict(arguments))
        recorded = self.store.leaf_execution(call_id)
        if recorded is not None:
            if recorded.digest != digest:
                return LeafOutcome(error=f"call id {call_id} was recorded for another call "
                                         f"({recorded.path}); not run", is_replayed=True)
            if not recorded.is_finished:
                return LeafOutcome(error="interrupted: the service stopped while this call "
                                         "ran, so it may have taken effect; not run again",
                                   is_replayed=True)
            return LeafOutcome(result=recorded.result, error=recorded.error, is_replayed=True)
        self.store.begin_leaf(call_id, path=leaf.path_str, digest=digest,
                              session_id=None if fence is None else fence.session_id,
                              token=None if fence is None else fence.token)
        outcome = self.inner.execute(leaf, arguments, call_id)
        result, error = outcome.result, outcome.error
        try:  # what is recorded is what a replay returns: the result as JSON reads it back
            result = json.loads(strict_json(result))
        except Exception as e:  # the tool's result, not our bug (even a __str__ that raises)
            result, error = None, error or f"result is not JSON-serialisable: " \
                                            f"{type(e).__name__}: {e}"
        # What a replay returns is what the store could keep: text every backend stores.
        done = LeafOutcome(result=result, error=storable_text(error))
        with self._lock:
            self._unsaved[call_id] = done
        self.store.finish_leaf(call_id, result=result, error=done.error)
        with self._lock:
            self._unsaved.pop(call_id, None)
        return done
