"""HTTP routes for sessions: whole tasks run in the background, gated calls approved or
rejected, missing values supplied, traces and server-sent events. Routes only: the work is
`server/service/sessions.py`. Every blocking call (SQLite, the first step) runs in a worker
thread (FastAPI runs plain `def` routes in its thread pool)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Response
from fastapi.responses import StreamingResponse
from stackroute.runtime.errors import InputError
from stackroute.runtime.governance import RunStatus
from stackroute.server.http.app_state import AppState, get_state
from stackroute.server.http.errors import error_responses
from stackroute.server.http.routing_schemas import (
    CreateSessionRequest,
    GateRequest,
    SessionList,
    SessionView,
    ToolResultRequest,
    ValuesRequest,
)
from stackroute.server.http.routing_views import session_summary, session_view
from stackroute.server.http.sse import SSE_OPENAPI, SseEvent, sse_response
from stackroute.server.service.catalog_registry import UnknownCatalogError
from stackroute.server.service.session_events import StreamEnd
from stackroute.server.service.sessions import SessionService
from stackroute.server.service.store_records import SessionRecord
from starlette.concurrency import run_in_threadpool

MAX_SQL_INT = (1 << 63) - 1  # SQLite's largest INTEGER: a larger offset or seq cannot bind

router = APIRouter(tags=["routing"])
StateDep = Annotated[AppState, Depends(get_state)]


class NdjsonResponse(Response):
    media_type = "application/x-ndjson"


def _sessions(app: AppState) -> SessionService:
    return app.service().sessions


def _view(app: AppState, record: SessionRecord, *, include_state: bool = False) -> SessionView:
    """The session's view; a call waiting for values shows their schema, read from the
    session's catalog (kept while a paused session uses it; gone, each shows as `{}`)."""
    pending = record.state.pending
    tree = None
    if pending is not None and pending.is_waiting_for_values:
        try:
            tree = app.service().catalogs.get(record.row.catalog_id).tree
        except UnknownCatalogError:
            tree = None
    return session_view(record, include_state=include_state, tree=tree)


@router.post("/v1/sessions", status_code=201, responses=error_responses(403, 404, 422, 429))
def create_session(body: CreateSessionRequest, app: StateDep) -> SessionView:
    """Start a task; it runs in the background, one persisted transition at a time."""
    limits = None if body.limits is None else body.limits.model_dump(exclude_none=True)
    record = _sessions(app).create(body.catalog, body.task, limits=limits, is_flat=body.flat,
                                   is_auto_approve=body.auto_approve)
    return _view(app, record)


@router.get("/v1/sessions", responses=error_responses(422))
def list_sessions(
    app: StateDep,
    status: Annotated[RunStatus | None, Query(description="only sessions in this state")] = None,
    catalog: Annotated[str | None, Query(description="only sessions of this catalog")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=MAX_SQL_INT)] = 0,
) -> SessionList:
    rows = _sessions(app).list_sessions(status=status, catalog_id=catalog, limit=limit,
                                        offset=offset)
    return SessionList(sessions=[session_summary(r) for r in rows])


@router.get("/v1/sessions/{session_id}", responses=error_responses(404, 422))
def get_session(
    session_id: str, app: StateDep,
    include_state: Annotated[bool, Query(description="add the whole run state")] = False,
) -> SessionView:
    """State, stack, pending call and the trace so far."""
    return _view(app, _sessions(app).get(session_id), include_state=include_state)


@router.post("/v1/sessions/{session_id}/approve", responses=error_responses(404, 409, 422))
def approve_session(session_id: str, body: GateRequest, app: StateDep) -> SessionView:
    """Run the call waiting at the confirmation gate (the digest must match it)."""
    return _view(app, _sessions(app).approve(session_id, body.digest))


@router.post("/v1/sessions/{session_id}/reject", responses=error_responses(404, 409, 422))
def reject_session(session_id: str, body: GateRequest, app: StateDep) -> SessionView:
    """Refuse the paused call (at the gate, or waiting for values); the run continues
    without it."""
    return _view(app, _sessions(app).reject(session_id, body.digest))


@router.post("/v1/sessions/{session_id}/values", responses=error_responses(400, 404, 409, 422))
def supply_session_values(session_id: str, body: ValuesRequest, app: StateDep) -> SessionView:
    """Give the call waiting for values (its `missing_values`) exactly those, shaped by its
    `values_schema`: it then runs, or (a sensitive leaf) waits at its gate under a new
    digest. Wrong values are refused with what was expected and change nothing."""
    return _view(app, _sessions(app).supply(session_id, body.digest, body.values))


@router.post("/v1/sessions/{session_id}/result", responses=error_responses(404, 409, 422))
def submit_session_result(session_id: str, body: ToolResultRequest,
                          app: StateDep) -> SessionView:
    """Hand back the outcome of the call waiting at the gate, run by the client itself (the
    server does not run it); the run continues with it."""
    return _view(app, _sessions(app).submit_result(session_id, body.digest,
                                                   result=body.result, error=body.error))


@router.post("/v1/sessions/{session_id}/cancel", responses=error_responses(404, 409, 422))
def cancel_session(session_id: str, app: StateDep) -> SessionView:
    return _view(app, _sessions(app).cancel(session_id))


@router.get("/v1/sessions/{session_id}/trace", response_class=NdjsonResponse,
            responses={200: {"description": "one trace event (JSON) per line"},
                       **error_responses(404, 422)})
def session_trace(session_id: str, app: StateDep) -> NdjsonResponse:
    """The transitions so far as JSON lines."""
    return NdjsonResponse(_sessions(app).trace_jsonl(session_id))


async def _existing_session(session_id: str, app: StateDep,
                            after: Annotated[int | None, Query(
                                ge=-1, le=MAX_SQL_INT,
                                description="only events with a greater seq")] = None,
                            last_event_id: Annotated[str | None, Header()] = None,
                            ) -> AsyncIterator[Any]:
    after_seq = after if after is not None else _last_event_id(last_event_id)
    return await run_in_threadpool(_sessions(app).events, session_id, after_seq=after_seq)


@router.get("/v1/sessions/{session_id}/events", response_class=StreamingResponse,
            responses={**SSE_OPENAPI, **error_responses(400, 404, 422)})
async def session_events(
    stream: Annotated[AsyncIterator[Any], Depends(_existing_session)],
) -> StreamingResponse:
    """Server-sent events: one `transition` event per trace event (id = its seq), then an
    `end` event with the status once the session is no longer running (final or paused)."""
    return sse_response(_session_events(stream))


async def _session_events(stream: AsyncIterator[Any]) -> AsyncIterator[SseEvent]:
    async for item in stream:
        if isinstance(item, StreamEnd):
            yield SseEvent({"status": item.status.value}, event="end")
            return
        yield SseEvent(item, event="transition", id=str(item["seq"]))


def _last_event_id(value: str | None) -> int:
    try:
        seq = int(value) if value else -1
    except ValueError as e:
        raise InputError(f"Last-Event-ID must be an event seq (an integer), got "
                         f"{value[:40]!r}") from e
    if not -1 <= seq <= MAX_SQL_INT:
        raise InputError(f"Last-Event-ID must be an event seq from -1 to {MAX_SQL_INT}, got "
                         f"{value[:40]!r}")
    return seq
