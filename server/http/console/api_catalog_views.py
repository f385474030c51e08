"""Read-only catalog routes the console uses (any client may): the tree of a loaded catalog
and its lint findings. Routes only: the views are `catalog_views.py`."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from stackroute.server.http.app_state import AppState, get_state
from stackroute.server.http.console.catalog_views import ViewCache, tree_view
from stackroute.server.http.errors import error_responses
from starlette.concurrency import run_in_threadpool

StateDep = Annotated[AppState, Depends(get_state)]


def build_router() -> APIRouter:
    """The routes, with their own view cache (one per app)."""
    router = APIRouter(tags=["routing"])
    views = ViewCache()

    @router.get("/v1/catalogs/{catalog_id}/tree", responses=error_responses(404))
    def catalog_tree(catalog_id: str, app: StateDep) -> dict[str, Any]:
        """The catalog's capability tree: each node's name, path, description, and a leaf's
        parameters and `sensitive` flag."""
        return tree_view(app.service().catalogs.get(catalog_id).tree.root)


    @router.get("/v1/catalogs/{catalog_id}/lint", responses=error_responses(404, 422))
    async def catalog_lint(
        catalog_id: str, app: StateDep,
        embeddings: Annotated[bool, Query(
            description="also the checks that need the embedding model (similar siblings, "
                        "near-duplicate leaves); the first call loads it (seconds)")] = True,
    ) -> dict[str, Any]:
        """`stackroute lint`'s findings for a loaded catalog (overlaps, wide menus, deep trees,
        repeated names), each with the node paths it concerns; computed once per catalog."""
        entry = app.service().catalogs.get(catalog_id)
        return await run_in_threadpool(views.lint, entry.id, entry.tree,
                                       use_embeddings=embeddings)

    return router
