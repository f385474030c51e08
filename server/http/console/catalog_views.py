"""Read-only views of a loaded catalog for the console: its tree as nested JSON, and its lint
findings (the runtime's structural warnings merged with the overlap checks of
`server/tools/lint_overlaps.py`), each naming the node paths it concerns.

A catalog's id is the hash of its content, so both views are computed once per id and kept
(a few catalogs' worth: `MAX_KEPT`)."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any

from stackroute.runtime.errors import InputError
from stackroute.runtime.lint import structural_warnings
from stackroute.runtime.tree import CapabilityTree, Node

MAX_KEPT = 16


def tree_view(node: Node) -> dict[str, Any]:
    """`{name, path, description, is_leaf, sensitive, parameters?, children?}`, recursively."""
    out: dict[str, Any] = {"name": node.name, "path": node.path_str,
                           "description": node.description, "is_leaf": node.is_leaf,
                           "sensitive": node.sensitive}
    if node.is_leaf:
        out["parameters"] = dict(node.parameters or {})
    else:
        out["children"] = [tree_view(c) for c in node.children]
    return out


def lint_view(tree: CapabilityTree, *, use_embeddings: bool) -> dict[str, Any]:
    """`{"warnings": [{kind, severity, path, paths, message, suggestion, score}],
    "by_kind": {kind: n}, "embeddings_skipped": reason | None, "seconds": s}`."""
    from stackroute.server.tools.lint_overlaps import merge_warnings
    from stackroute.server.tools.taxonomy import FindingSummary, overlap_findings

    started = time.perf_counter()
    embedder, skipped = None, None if use_embeddings else "not requested"
    if use_embeddings:
        from stackroute.server.embeddings.embedder import shared_embedder

        try:
            embedder = shared_embedder()
        except InputError as e:  # no embedding model installed
            skipped = str(e)
    findings = overlap_findings(tree, embedder)
    return {"warnings": merge_warnings(structural_warnings(tree), findings),
            "by_kind": FindingSummary.of(findings).by_kind, "embeddings_skipped": skipped,
            "seconds": round(time.perf_counter() - started, 3)}


class ViewCache:
    """Views by (catalog id, kind): computed once, the `MAX_KEPT` most recent kept."""

    def __init__(self, max_kept: int = MAX_KEPT) -> None:
        self._views: OrderedDict[tuple[str, str], dict[str, Any]] = OrderedDict()
        self._lock = threading.Lock()
        self._max_kept = max_kept

    def lint(self, catalog_id: str, tree: CapabilityTree, *,
             use_embeddings: bool) -> dict[str, Any]:
        key = (catalog_id, "lint+embeddings" if use_embeddings else "lint")
        with self._lock:
            if key in self._views:
                self._views.move_to_end(key)
                return self._views[key]
        view = lint_view(tree, use_embeddings=use_embeddings)  # outside the lock: seconds
        with self._lock:
            self._views[key] = view
            while len(self._views) > self._max_kept:
                self._views.popitem(last=False)
        return view
