"""Leaf calls run at most once per call id, across crashes: the session service's executor.

The call is recorded as begun (committed) before the handler runs and its outcome
(committed) before it is returned, so a resumed run meets its own record instead of running
the tool again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from stackroute.runtime.handlers import Executor, LeafOutcome
from stackroute.runtime.state import arguments_digest
from stackroute.runtime.tree import Node
from stackroute.server.service.store import SessionStore, strict_json


class StoreExecutor:
    """An executor that runs each leaf call at most once, by its call id, across crashes.

    The call is recorded as begun (committed) before the handler runs and its outcome
    (committed) before it is returned. Meeting a recorded call id again returns the recorded
    outcome; a call begun but never finished (the process died inside the handler) is not run
    again either: it reports an error, because the handler may already have acted.
    """

    def __init__(self, store: SessionStore, inner: Executor) -> None:
        self.store = store
        self.inner = inner

    def execute(self, leaf: Node, arguments: Mapping[str, Any], call_id: str) -> LeafOutcome:
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
        self.store.begin_leaf(call_id, path=leaf.path_str, digest=digest)
        outcome = self.inner.execute(leaf, arguments, call_id)
        result, error = outcome.result, outcome.error
        try:  # what is recorded is what a replay returns: the result as JSON reads it back
            result = json.loads(strict_json(result))
        except Exception as e:  # the tool's result, not our bug (even a __str__ that raises)
            result, error = None, error or f"result is not JSON-serialisable: " \
                                            f"{type(e).__name__}: {e}"
        self.store.finish_leaf(call_id, result=result, error=error)
        return LeafOutcome(result=result, error=error)
