"""The routing API's response bodies built from the service's records (sessions, catalogs,
routing calls): the one place their shapes are filled in."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from stackroute.runtime.missing_values import values_schema
from stackroute.runtime.tree import CapabilityTree
from stackroute.server.http.routing_schemas import (
    CatalogInfo,
    CompileStats,
    FrameModel,
    PendingCallModel,
    RouteResponse,
    SessionSummary,
    SessionView,
    TreeStatsModel,
    UsageModel,
)
from stackroute.server.http.shown_text import shown_json
from stackroute.server.service.catalog_registry import CatalogEntry
from stackroute.server.service.route_call import RouteCallResult
from stackroute.server.service.store import SessionRecord, SessionRow, strict_json


def json_safe(value: Any) -> Any:
    return json.loads(strict_json(value))


def route_response(result: RouteCallResult) -> RouteResponse:
    event = result.event
    is_leaf = result.outcome == "leaf"
    return RouteResponse(
        decision=event.decision or "", node=event.path, menu=list(event.menu or ()),
        probabilities=dict(event.probabilities or {}), is_leaf=is_leaf,
        arguments=dict(event.arguments or {}) if is_leaf else None, misstep=result.misstep,
        written_values=list(result.written_values), missing_values=list(result.missing_values),
        usage=UsageModel(**dict(event.usage or {})),
        state=None if result.state is None else json_safe(result.state),
        routing=result.routing)


def session_summary(row: SessionRow) -> SessionSummary:
    return SessionSummary(id=row.id, catalog=row.catalog_id, status=row.status, task=row.task,
                          flat=row.is_flat, auto_approve=row.is_auto_approve,
                          created_unix=row.created_unix, updated_unix=row.updated_unix)


def session_view(record: SessionRecord, *, include_state: bool = False,
                 tree: CapabilityTree | None = None) -> SessionView:
    """The session as the API shows it; `tree` (the session's catalog) gives the schema of
    the values a pending call waits for (without it each value's schema shows as `{}`)."""
    data = json_safe(record.state.to_dict())
    pending: Mapping[str, Any] | None = data["pending"]
    return SessionView(
        **session_summary(record.row).model_dump(),
        num_steps=data["num_steps"], num_format_failures=data["num_format_failures"],
        pending=None if pending is None else pending_call(pending, tree),
        stack=[FrameModel(**{k: f[k] for k in FrameModel.model_fields}) for f in data["stack"]],
        calls=data["calls"], result=data["result"], error=data["error"],
        usage=UsageModel(**data["usage"]), trace=data["trace"],
        state=data if include_state else None)


def pending_call(pending: Mapping[str, Any], tree: CapabilityTree | None) -> PendingCallModel:
    """A serialised pending call as the API shows it (`PendingCall.to_dict`'s shape)."""
    missing = tuple(pending.get("missing_values", ()))
    node = None if tree is None or not missing else tree.get(pending["path"])
    return PendingCallModel(
        path=pending["path"], arguments=pending["arguments"],
        arguments_text=shown_json(pending["arguments"]), call_id=pending["call_id"],
        digest=pending["digest"], is_gated=pending["is_gated"],
        written_values=pending.get("written_values", []), missing_values=list(missing),
        supplied_values=pending.get("supplied_values", []),
        values_schema=values_schema(None if node is None else node.parameters, missing)
        if missing else None)


def catalog_info(entry: CatalogEntry) -> CatalogInfo:
    stats = entry.tree.stats().to_dict()
    return CatalogInfo(
        id=entry.id, name=entry.name, description=entry.tree.root.description,
        format="yaml" if entry.format == "yaml" else "json", created_unix=entry.created_unix,
        stats=TreeStatsModel(**stats),
        compile=CompileStats(num_menus=entry.compile.num_menus,
                             num_schemas=entry.compile.num_schemas,
                             compile_ms=entry.compile.compile_ms))
