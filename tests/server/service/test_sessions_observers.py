"""Session observers (metrics' routing calls, telemetry's saved transitions) are constructor
arguments (issue 24.4): a session resumed at start reports from its first step, which the
old attributes, set on the service after it had resumed its sessions, could miss."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from doubles import PlanEngine
from session_kit import BANK_CATALOG, logging_handlers, wait_for_status
from stackroute.runtime.governance import Limits, RunStatus
from stackroute.runtime.trace import TraceEvent
from stackroute.runtime.usage import Usage
from stackroute.server.routing.router import build_machine
from stackroute.server.service.catalog_registry import CatalogRegistry
from stackroute.server.service.session_options import SessionOptions
from stackroute.server.service.sessions import SessionService
from stackroute.server.service.store import SessionStore


def test_a_session_resumed_at_start_reports_every_step_to_its_observers(
        tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "stackroute.db")
    engine = PlanEngine(plan=["payments", "balance"])
    catalogs = CatalogRegistry(store, engine)
    entry = catalogs.add_text(json.dumps(BANK_CATALOG))[0]
    # A running session a stopped process left behind.
    state = build_machine(entry.tree, engine, limits=Limits()).start("What is my balance?",
                                                                     run_id="left")
    store.create_session("left", catalog_id=entry.id, state=state, is_flat=False,
                         is_auto_approve=False)
    saved: list[tuple[str, Sequence[TraceEvent]]] = []
    routed: list[tuple[str, Usage]] = []
    contexts: list[tuple[str, int | None]] = []

    def traceparent(session_id: str, frame_id: int | None) -> None:
        contexts.append((session_id, frame_id))

    sessions = SessionService(store, catalogs, engine,
                              handlers=logging_handlers(tmp_path / "log.jsonl"),
                              options=SessionOptions(leaf_isolation="thread"),
                              on_saved=lambda sid, events: saved.append((sid, events)),
                              on_routing_call=lambda outcome, usage: routed.append(
                                  (outcome, usage)),
                              step_traceparent=traceparent)
    try:
        assert sessions.resume_interrupted() == ["left"]
        assert wait_for_status(store, "left") is RunStatus.DONE
        trace = sessions.get("left").state.trace
        reported = [e.seq for sid, events in saved for e in events if sid == "left"]
        assert reported == list(range(len(state.trace), len(trace)))  # every saved step
        assert [outcome for outcome, _ in routed][:2] == ["router", "leaf"]
        assert len(routed) == sum(1 for e in trace if e.kind.value == "route")
        assert contexts and all(sid == "left" for sid, _ in contexts)
    finally:
        sessions.close()
        store.close()
