"""A process that runs one session and kills itself (SIGKILL) at the worst moment: the leaf has
run and its execution is recorded, but the state after it is not saved yet.

    python session_crash_child.py DB_PATH HANDLER_LOG
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from doubles import PlanEngine
from session_kit import BANK_CATALOG, logging_handlers
from stackroute.runtime.state import RunState
from stackroute.runtime.trace import EventKind, TraceEvent
from stackroute.server.service.catalog_registry import CatalogRegistry
from stackroute.server.service.session_options import SessionOptions
from stackroute.server.service.sessions import SessionService
from stackroute.server.service.store import SessionStore


class KillingStore(SessionStore):
    def save_step(self, session_id: str, state: RunState, events: Sequence[TraceEvent], *,
                  token: int | None = None) -> None:
        if any(e.kind is EventKind.LEAF_RESULT for e in events):
            os.kill(os.getpid(), signal.SIGKILL)
        super().save_step(session_id, state, events, token=token)


def main(db_path: str, log_path: str) -> None:
    store = KillingStore(db_path)
    engine = PlanEngine()
    catalogs = CatalogRegistry(store, engine)
    entry, _ = catalogs.add_text(json.dumps(BANK_CATALOG))
    service = SessionService(store, catalogs, engine, handlers=logging_handlers(Path(log_path)),
                             options=SessionOptions(leaf_isolation="thread"))
    service.create(entry.id, "Send 5 to Asha", is_auto_approve=True)
    time.sleep(30)  # the worker kills the process long before this ends


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
