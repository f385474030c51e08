"""HTTP route for single routing calls (`POST /v1/route`). Routes only: the call itself is
`server/service/route_call.py`; it runs in a worker thread through the app's engine queue.
Errors are the runtime's `InputError`s, answered in the app's one error shape by
`server/http/errors.py` (a malformed `state` is a 400 naming the field)."""

from __future__ import annotations

import functools
from typing import Annotated

from fastapi import APIRouter, Depends
from stackroute.runtime.errors import InputError
from stackroute.runtime.usage import Usage
from stackroute.server.http.app_state import AppState, get_state
from stackroute.server.http.errors import error_responses
from stackroute.server.http.routing_schemas import RouteRequest, RouteResponse
from stackroute.server.http.routing_views import route_response
from stackroute.server.service.route_call import RouteCall, RouteCallResult, route_once
from stackroute.server.telemetry_spans import routing_call_spans

router = APIRouter(tags=["routing"])
StateDep = Annotated[AppState, Depends(get_state)]


@router.post("/v1/route", responses=error_responses(400, 404, 409, 422, 429))
async def route(body: RouteRequest, app: StateDep) -> RouteResponse:
    """One routing call: the menu at a node (or a state's top frame) and the decision."""
    services = app.service()
    entry = services.catalogs.get(body.catalog)
    call = RouteCall(catalog=body.catalog, node=body.node, task=_task(body), state=body.state,
                     is_flat=body.flat, include_state=body.include_state)
    result: RouteCallResult = await app.engine_queue.run(
        functools.partial(route_once, entry.tree, call, services.route_context))
    app.metrics.observe_routing_call(outcome=result.outcome,
                                     usage=Usage.from_dict(dict(result.event.usage or {})))
    if app.tracer is not None:  # under this request's span
        routing_call_spans(app.tracer, result.event, model=app.engine.info.model,
                           system=app.engine.info.engine)
    return route_response(result)


def _task(body: RouteRequest) -> str | None:
    """The request's text (None when a `state` carries it)."""
    if body.state is not None:
        return None
    if (body.query is None) == (body.messages is None):
        raise InputError("give exactly one of `query` and `messages` (or a `state`)")
    if body.query is not None:
        return body.query
    users = [m.content for m in body.messages or () if m.role == "user"]
    if not users:
        raise InputError("`messages` has no user message")
    return "\n".join(users)
