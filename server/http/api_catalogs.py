"""HTTP routes for catalogs: upload (validated and compiled before it is listed), list, get,
delete. Routes only: the work is `server/service/catalog_registry.py`."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Request, Response
from stackroute.runtime.errors import InputError
from stackroute.server.http.app_state import AppState, get_state
from stackroute.server.http.errors import error_responses
from stackroute.server.http.routing_schemas import CatalogCreated, CatalogInfo, CatalogList
from stackroute.server.http.routing_views import catalog_info
from starlette.concurrency import run_in_threadpool

YAML_MEDIA_TYPES = frozenset({"application/yaml", "application/x-yaml", "text/yaml",
                              "text/x-yaml"})

router = APIRouter(tags=["routing"])
StateDep = Annotated[AppState, Depends(get_state)]

_CATALOG_BODY = {"requestBody": {"required": True, "content": {
    "application/json": {"schema": {"type": "object",
                                    "description": "the catalog's root node (FORMAT.md)"}},
    "application/yaml": {"schema": {"type": "string", "description": "the catalog as YAML "
                                    "(anchors and aliases are refused)"}},
}}}  # not text/plain: a web page may send that cross-site (server/http/origin_guard.py)


@router.post("/v1/catalogs", status_code=201, openapi_extra=_CATALOG_BODY,
             responses=error_responses(400, 409, 422))
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
    entry, is_new = await run_in_threadpool(app.service().catalogs.add_text, text, fmt=fmt)
    return CatalogCreated(**catalog_info(entry).model_dump(), is_new=is_new)


@router.get("/v1/catalogs")
def list_catalogs(app: StateDep) -> CatalogList:
    return CatalogList(catalogs=[catalog_info(e) for e in app.service().catalogs.entries()])


@router.get("/v1/catalogs/{catalog_id}", responses=error_responses(404))
def get_catalog(catalog_id: str, app: StateDep) -> CatalogInfo:
    """A catalog's statistics and the cost of compiling it."""
    return catalog_info(app.service().catalogs.get(catalog_id))


@router.delete("/v1/catalogs/{catalog_id}", status_code=204, response_class=Response,
               responses=error_responses(404, 409))
def delete_catalog(catalog_id: str, app: StateDep) -> Response:
    """Forget a catalog (refused while running or paused sessions use it)."""
    app.service().catalogs.delete(catalog_id)
    return Response(status_code=204)


def _format_of(content_type: str, text: str) -> str:
    media_type = content_type.split(";")[0].strip().lower()
    if media_type in YAML_MEDIA_TYPES:
        return "yaml"
    if media_type == "application/json" or media_type.endswith("+json"):
        return "json"
    return "json" if text.lstrip().startswith(("{", "[")) else "yaml"
