"""HTTP routes for routing calls, sessions and catalogs (`router`), and their set-up.

Routes only: the work happens in `catalog_registry`, `sessions` and the stack machine. Every
blocking call (the model, SQLite, constraint compilation) runs in a worker thread, never on the
event loop; a routing call's model work goes through the app's engine queue when there is one.
Errors are the runtime's `InputError`s (each class's `http_status`, else the app's mapping:
`StateError` 409, `CatalogError` 422 with its problems by node path), answered in the app's
one error shape by `server/http/errors.py`.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.sse import EventSourceResponse, ServerSentEvent
from stackroute.runtime.errors import InputError, StateError
from stackroute.runtime.governance import RunStatus
from stackroute.runtime.machine import StackMachine
from stackroute.runtime.state import RunState
from stackroute.runtime.trace import EventKind
from stackroute.runtime.tree import CapabilityTree
from stackroute.runtime.usage import Usage
from stackroute.server.engines.base import Engine
from stackroute.server.http.app_state import AppState, get_state
from stackroute.server.http.errors import error_responses
from stackroute.server.http.routing_schemas import (
    CatalogCreated,
    CatalogInfo,
    CatalogList,
    CompileStats,
    CreateSessionRequest,
    FrameModel,
    GateRequest,
    PendingCallModel,
    RouteRequest,
    RouteResponse,
    SessionList,
    SessionSummary,
    SessionView,
    TreeStatsModel,
    UsageModel,
)
from stackroute.server.routing.options import DraftSource
from stackroute.server.routing.router import EngineRouter, build_machine
from stackroute.server.routing.speculator_pool import SpeculatorPool
from stackroute.server.service.catalog_registry import CatalogEntry, CatalogRegistry
from stackroute.server.service.sessions import (
    SessionOptions,
    SessionService,
    StreamEnd,
    routing_outcome,
)
from stackroute.server.service.store import SessionRecord, SessionRow, SessionStore, strict_json
from starlette.concurrency import run_in_threadpool

log = logging.getLogger(__name__)

MAX_SQL_INT = (1 << 63) - 1  # SQLite's largest INTEGER: a larger offset or seq cannot bind
YAML_MEDIA_TYPES = frozenset({"application/yaml", "application/x-yaml", "text/yaml",
                              "text/x-yaml"})

router = APIRouter(tags=["routing"])
StateDep = Annotated[AppState, Depends(get_state)]


class RoutingLimitError(InputError):
    """A routing call over the server's menu or prompt limits."""

    code = "routing_limit"
    http_status = 422


class NdjsonResponse(Response):
    media_type = "application/x-ndjson"


# -- routing calls ---------------------------------------------------------------------------
@router.post("/v1/route", responses=error_responses(400, 404, 409, 422, 429))
async def route(body: RouteRequest, app: StateDep) -> RouteResponse:
    """One routing call: the menu at a node (or a state's top frame) and the decision."""
    entry = _catalogs(app).get(body.catalog)
    call = functools.partial(_route_once, entry.tree, app.engine, body, app.settings,
                             app.extras.get("speculators"))
    result: tuple[RouteResponse, str]
    if app.engine_queue is not None:
        result = await app.engine_queue.run(call)
    else:
        result = await run_in_threadpool(call)
    response, outcome = result
    if app.metrics is not None:
        app.metrics.observe_routing_call(outcome=outcome,
                                         usage=Usage(**response.usage.model_dump()))
    return response


def _route_once(tree: CapabilityTree, engine: Engine, body: RouteRequest, settings: Any,
                speculators: SpeculatorPool | None = None) -> tuple[RouteResponse, str]:
    """Build the machine, start (or load) the run, check the limits, make one routing call;
    return the response and the routing outcome for the metrics. Runs in a worker thread.
    With speculation on, the catalog's long-lived speculator may answer from a path verified
    by an earlier call of the same run (the client sends the state back each time)."""
    speculator = None if speculators is None else speculators.for_tree(tree)
    if body.state is not None:
        run = _parse_state(body.state)
        machine = build_machine(tree, engine, is_flat=run.is_flat, speculator=speculator)
        if run.catalog != machine.tree.name:
            raise InputError(f"the state is of catalog {run.catalog!r}, not "
                             f"{machine.tree.name!r}")
        _check_frames(run, machine.tree)
        if run.pending is not None:
            raise StateError(f"the state has a pending call ({run.pending.path}); a routing "
                             "call needs a state without one")
    else:
        machine = build_machine(tree, engine, is_flat=body.flat, speculator=speculator)
        node = machine.tree.get(body.node)
        if node is None or node.is_leaf:
            raise InputError(f"no router at node path {body.node!r} in catalog "
                             f"{body.catalog!r}")
        run = machine.start(_task(body), at=body.node, is_flat=body.flat)
    if run.status is RunStatus.RUNNING:
        _check_prompt_limits(machine, run, settings)
    num_events = len(run.trace)
    machine.step(run)
    new = run.trace[num_events:]
    event = next((e for e in new if e.kind is EventKind.ROUTE), None)
    if event is None:
        reason = next((dict(e.detail) for e in new if e.kind is EventKind.LIMIT), {})
        raise StateError(f"no routing call was made: the run reached a limit {reason}")
    outcome = routing_outcome(machine.tree, event)
    response = RouteResponse(
        decision=event.decision or "", node=event.path, menu=list(event.menu or ()),
        probabilities=dict(event.probabilities or {}), is_leaf=outcome == "leaf",
        arguments=dict(event.arguments or {}) if outcome == "leaf" else None,
        misstep=next((e.error for e in new if e.kind is EventKind.MISSTEP), None),
        usage=UsageModel(**dict(event.usage or {})),
        state=_json_safe(run.to_dict()) if body.state is not None or body.include_state
        else None)
    return response, outcome


def _check_prompt_limits(machine: StackMachine, run: RunState, settings: Any) -> None:
    max_menu = getattr(settings, "max_menu_options", None)
    menu = machine.menu_for(run, run.top())
    if max_menu is not None and len(menu.options) > max_menu:
        raise RoutingLimitError(f"the menu at {menu.node_path or '<root>'} has "
                                f"{len(menu.options)} options; the limit is {max_menu}")
    max_tokens = getattr(settings, "max_prompt_tokens", None)
    if max_tokens is not None:
        num_tokens = machine.router.engine.count_tokens(machine.layout.routing_prompt(run)) \
            if isinstance(machine.router, EngineRouter) else 0
        if num_tokens > max_tokens:
            raise RoutingLimitError(f"the routing prompt has {num_tokens} tokens; the limit "
                                    f"is {max_tokens}")


# -- sessions --------------------------------------------------------------------------------
@router.post("/v1/sessions", status_code=201, responses=error_responses(404, 422, 429))
def create_session(body: CreateSessionRequest, app: StateDep) -> SessionView:
    """Start a task; it runs in the background, one persisted transition at a time."""
    limits = None if body.limits is None else body.limits.model_dump(exclude_none=True)
    record = _sessions(app).create(body.catalog, body.task, limits=limits, is_flat=body.flat,
                                   is_auto_approve=body.auto_approve)
    return _session_view(record)


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
    return SessionList(sessions=[_summary(r) for r in rows])


@router.get("/v1/sessions/{session_id}", responses=error_responses(404, 422))
def get_session(
    session_id: str, app: StateDep,
    include_state: Annotated[bool, Query(description="add the whole run state")] = False,
) -> SessionView:
    """State, stack, pending call and the trace so far."""
    return _session_view(_sessions(app).get(session_id), include_state=include_state)


@router.post("/v1/sessions/{session_id}/approve", responses=error_responses(404, 409, 422))
def approve_session(session_id: str, body: GateRequest, app: StateDep) -> SessionView:
    """Run the call waiting at the confirmation gate (the digest must match it)."""
    return _session_view(_sessions(app).approve(session_id, body.digest))


@router.post("/v1/sessions/{session_id}/reject", responses=error_responses(404, 409, 422))
def reject_session(session_id: str, body: GateRequest, app: StateDep) -> SessionView:
    """Refuse the call waiting at the gate; the run continues without it."""
    return _session_view(_sessions(app).reject(session_id, body.digest))


@router.post("/v1/sessions/{session_id}/cancel", responses=error_responses(404, 409, 422))
def cancel_session(session_id: str, app: StateDep) -> SessionView:
    return _session_view(_sessions(app).cancel(session_id))


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


@router.get("/v1/sessions/{session_id}/events", response_class=EventSourceResponse,
            responses=error_responses(400, 404, 422))
async def session_events(
    stream: Annotated[AsyncIterator[Any], Depends(_existing_session)],
) -> AsyncIterator[ServerSentEvent]:
    """Server-sent events: one `transition` event per trace event (id = its seq), then an
    `end` event with the status once the session is no longer running (final or paused)."""
    async for item in stream:
        if isinstance(item, StreamEnd):
            yield ServerSentEvent(event="end", data={"status": item.status.value})
            return
        yield ServerSentEvent(event="transition", id=str(item["seq"]), data=item)


# -- catalogs --------------------------------------------------------------------------------
_CATALOG_BODY = {"requestBody": {"required": True, "content": {
    "application/json": {"schema": {"type": "object",
                                    "description": "the catalog's root node (FORMAT.md)"}},
    "application/yaml": {"schema": {"type": "string", "description": "the catalog as YAML"}},
    "text/plain": {"schema": {"type": "string",
                              "description": "JSON or YAML; say which with `format`"}},
}}}


@router.post("/v1/catalogs", status_code=201, openapi_extra=_CATALOG_BODY,
             responses=error_responses(400, 422))
async def add_catalog(
    request: Request, app: StateDep,
    format: Annotated[Literal["json", "yaml"] | None, Query(
        description="the body's format (default: from the content type)")] = None,
) -> CatalogCreated:
    """Validate a catalog, compile every node's constraints, and keep it across restarts."""
    raw = await request.body()  # bounded by the app's request body limit
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"catalog body is not UTF-8: {e}") from e
    fmt = format or _format_of(request.headers.get("content-type", ""), text)
    entry, is_new = await run_in_threadpool(_catalogs(app).add_text, text, fmt=fmt)
    return CatalogCreated(**_catalog_info(entry).model_dump(), is_new=is_new)


@router.get("/v1/catalogs")
def list_catalogs(app: StateDep) -> CatalogList:
    return CatalogList(catalogs=[_catalog_info(e) for e in _catalogs(app).entries()])


@router.get("/v1/catalogs/{catalog_id}", responses=error_responses(404))
def get_catalog(catalog_id: str, app: StateDep) -> CatalogInfo:
    """A catalog's statistics and the cost of compiling it."""
    return _catalog_info(_catalogs(app).get(catalog_id))


@router.delete("/v1/catalogs/{catalog_id}", status_code=204, response_class=Response,
               responses=error_responses(404, 409))
def delete_catalog(catalog_id: str, app: StateDep) -> Response:
    """Forget a catalog (refused while running or paused sessions use it)."""
    _catalogs(app).delete(catalog_id)
    return Response(status_code=204)


# -- set-up ----------------------------------------------------------------------------------
def setup_routing(state: AppState) -> None:
    """Open the store (settings.db), load the stored catalogs and settings.catalogs, and
    resume the sessions a stopped process left running."""
    settings = state.settings
    store = SessionStore(getattr(settings, "db", None) or ":memory:")
    catalogs = CatalogRegistry(store, state.engine, allowed_handler_modules=tuple(
        getattr(settings, "allowed_handler_modules", None) or ()))
    failed = catalogs.load_persisted()
    if failed:
        log.warning("%d stored catalog(s) did not load: %s", len(failed), ", ".join(failed))
    for path in getattr(settings, "catalogs", None) or ():
        entry = catalogs.add_file(path)
        log.info("catalog %s from %s", entry.id, path)
    max_steps = getattr(settings, "max_session_steps", None)
    options = SessionOptions(
        max_session_steps=None if max_steps is None else int(max_steps),
        leaf_timeout_s=float(getattr(settings, "leaf_timeout_s", 30.0)),
        leaf_isolation=str(getattr(settings, "leaf_isolation", "thread")),
        allowed_handler_modules=tuple(getattr(settings, "allowed_handler_modules", None) or ()),
        max_workers=int(getattr(settings, "max_session_workers", 4)),
        max_active=int(getattr(settings, "max_active_sessions", 64)),
    )
    metrics = state.metrics
    on_routing_call = None if metrics is None else (
        lambda outcome, usage: metrics.observe_routing_call(outcome=outcome, usage=usage))
    speculators = SpeculatorPool(state.engine, DraftSource(
        getattr(settings, "speculation", DraftSource.OFF)))
    state.extras["speculators"] = speculators
    sessions = SessionService(store, catalogs, state.engine, options=options,
                              on_routing_call=on_routing_call, speculators=speculators)
    state.catalogs = catalogs
    state.sessions = sessions
    state.extras["store"] = store
    resumed = sessions.resume_interrupted()
    if resumed:
        log.info("resumed %d interrupted session(s)", len(resumed))


def shutdown_routing(state: AppState) -> None:
    """Stop the session workers (after their current transition) and close the store."""
    if state.sessions is not None:
        state.sessions.close()
    store = state.extras.pop("store", None)
    if store is not None:
        store.close()


# -- helpers ---------------------------------------------------------------------------------
def _catalogs(app: AppState) -> CatalogRegistry:
    if app.catalogs is None:
        raise RuntimeError("setup_routing(state) was not called")
    registry: CatalogRegistry = app.catalogs
    return registry


def _sessions(app: AppState) -> SessionService:
    if app.sessions is None:
        raise RuntimeError("setup_routing(state) was not called")
    service: SessionService = app.sessions
    return service


def _task(body: RouteRequest) -> str:
    if (body.query is None) == (body.messages is None):
        raise InputError("give exactly one of `query` and `messages` (or a `state`)")
    if body.query is not None:
        return body.query
    users = [m.content for m in body.messages or () if m.role == "user"]
    if not users:
        raise InputError("`messages` has no user message")
    return "\n".join(users)


def _parse_state(data: dict[str, Any]) -> RunState:
    try:
        return RunState.from_dict(data)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise InputError(f"`state` is not a serialised run state: {type(e).__name__}: {e}"
                         ) from e


def _check_frames(run: RunState, tree: CapabilityTree) -> None:
    if not run.stack:
        raise InputError("the state has no frames on its stack")
    for frame in run.stack:
        node = tree.get(frame.node_path)
        if node is None or node.is_leaf:
            raise InputError(f"the state has a frame at {frame.node_path!r}, which is not a "
                             f"router of catalog {tree.name!r}")


def _json_safe(value: Any) -> Any:
    return json.loads(strict_json(value))


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


def _format_of(content_type: str, text: str) -> str:
    media_type = content_type.split(";")[0].strip().lower()
    if media_type in YAML_MEDIA_TYPES:
        return "yaml"
    if media_type == "application/json" or media_type.endswith("+json"):
        return "json"
    return "json" if text.lstrip().startswith(("{", "[")) else "yaml"


def _summary(row: SessionRow) -> SessionSummary:
    return SessionSummary(id=row.id, catalog=row.catalog_id, status=row.status, task=row.task,
                          flat=row.is_flat, auto_approve=row.is_auto_approve,
                          created_unix=row.created_unix, updated_unix=row.updated_unix)


def _session_view(record: SessionRecord, *, include_state: bool = False) -> SessionView:
    data = _json_safe(record.state.to_dict())
    pending: Mapping[str, Any] | None = data["pending"]
    return SessionView(
        **_summary(record.row).model_dump(),
        num_steps=data["num_steps"], num_format_failures=data["num_format_failures"],
        pending=None if pending is None else PendingCallModel(
            path=pending["path"], arguments=pending["arguments"], call_id=pending["call_id"],
            digest=pending["digest"], is_gated=pending["is_gated"]),
        stack=[FrameModel(**{k: f[k] for k in FrameModel.model_fields}) for f in data["stack"]],
        calls=data["calls"], result=data["result"], error=data["error"],
        usage=UsageModel(**data["usage"]), trace=data["trace"],
        state=data if include_state else None)


def _catalog_info(entry: CatalogEntry) -> CatalogInfo:
    stats = entry.tree.stats().to_dict()
    return CatalogInfo(
        id=entry.id, name=entry.name, description=entry.tree.root.description,
        format="yaml" if entry.format == "yaml" else "json", created_unix=entry.created_unix,
        stats=TreeStatsModel(**stats),
        compile=CompileStats(num_menus=entry.compile.num_menus,
                             num_schemas=entry.compile.num_schemas,
                             compile_ms=entry.compile.compile_ms))
