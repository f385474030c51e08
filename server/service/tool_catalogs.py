"""A chat request's `tools` list as a catalog: imported, grouped into a tree when it is wider
than a menu should be, compiled and registered once per distinct list (by content hash).

Its leaves are the client's to run: each is a gate (`sensitive`), so a session over the
catalog pauses at every call and takes the client's result through the sessions API.

The first request with a list pays the import, the build-tree (embedding every tool and
clustering them; about a minute for thousands of tools on a CPU) and the engine's compile; a
later request with the same list finds it in memory and pays nothing. The catalog goes
through the service's `CatalogRegistry`, so it has a content-hash id, is stored, and its
routers (leaf evidence, caches) are those every request on it shares.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stackroute.runtime.catalog import build_tree
from stackroute.runtime.errors import InputError
from stackroute.runtime.importers import from_openai_tools
from stackroute.runtime.tree import CapabilityTree, Node
from stackroute.server.embeddings.embedder import TextEmbedder
from stackroute.server.service.catalog_registry import CatalogEntry, CatalogRegistry

log = logging.getLogger(__name__)

ROOT_NAME = "tools"
ROOT_DESCRIPTION = "The tools this conversation offers."
MAX_BUILT_CHILDREN = 12  # build-tree's default: routers of 6..12 options


class DuplicateToolError(InputError):
    code = "duplicate_tool"


@dataclass(frozen=True, kw_only=True)
class ToolCatalog:
    """A tools list as routed: its registered catalog and the way back to function names."""

    entry: CatalogEntry
    num_tools: int
    build_ms: float  # what building it cost the request that built it
    is_built_tree: bool  # grouped by build-tree (the list was wider than a menu)
    paths: Mapping[str, str]  # function name -> leaf path

    @property
    def tree(self) -> CapabilityTree:
        return self.entry.tree

    def function_name(self, leaf: Node) -> str:
        """The name the client gave the tool (the leaf may be renamed or nested)."""
        return _function_name(leaf)

    def leaf_for(self, function: str) -> Node | None:
        path = self.paths.get(function)
        return None if path is None else self.tree.get(path)


class ToolCatalogs:
    """Built tool catalogs by the content hash of their tools list, least recently used
    dropped beyond `max_entries` (the registry keeps the catalog itself)."""

    def __init__(self, registry: CatalogRegistry, *, max_menu: int, max_entries: int,
                 embedder_factory: Callable[[], TextEmbedder] | None = None) -> None:
        self.registry = registry
        self.max_menu = max_menu
        self.max_entries = max_entries
        self._embedder_factory = embedder_factory
        self._entries: OrderedDict[str, ToolCatalog] = OrderedDict()
        self._building: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    def get(self, tools: Sequence[Mapping[str, Any]]) -> tuple[ToolCatalog, bool]:
        """The catalog of `tools` and whether an earlier request built it."""
        key = tools_key(tools)
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                return found, True
            building = self._building.setdefault(key, threading.Lock())
        with building:  # one build per list; a concurrent request waits for it
            with self._lock:
                found = self._entries.get(key)
            if found is not None:
                return found, True
            built = self._build(tools)
            with self._lock:
                self._entries[key] = built
                self._building.pop(key, None)
                while len(self._entries) > self.max_entries:
                    self._entries.popitem(last=False)
        return built, False

    def _build(self, tools: Sequence[Mapping[str, Any]]) -> ToolCatalog:
        started = time.perf_counter()
        names = [str(t.get("function", t).get("name")) for t in tools]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise DuplicateToolError(f"tools: each function name once; repeated: "
                                     f"{', '.join(repeated)}")
        doc = from_openai_tools(tools, name=ROOT_NAME, description=ROOT_DESCRIPTION)
        _mark_client_executed(doc)
        is_built = build_tree(doc).stats().max_menu > self.max_menu
        if is_built:
            doc = self._grouped(doc)
        grouped = time.perf_counter()
        entry, _ = self.registry.add_text(json.dumps(doc, ensure_ascii=False))
        build_ms = (time.perf_counter() - started) * 1000
        log.info("tools catalog %s: %d tools%s, built in %.0f ms (import and grouping %.0f "
                 "ms, registry: validation, compile, leaf index %.0f ms)", entry.id,
                 len(tools), " grouped into a tree" if is_built else "", build_ms,
                 (grouped - started) * 1000, (time.perf_counter() - grouped) * 1000)
        paths = {_function_name(leaf): leaf.path_str for leaf in entry.tree.leaves()}
        return ToolCatalog(entry=entry, num_tools=len(tools), build_ms=build_ms,
                           is_built_tree=is_built, paths=paths)

    def _grouped(self, doc: dict[str, Any]) -> dict[str, Any]:
        from stackroute.server.tools.tree_builder import build_tree_from_flat

        max_children = max(2, min(MAX_BUILT_CHILDREN, self.max_menu))
        return build_tree_from_flat(doc, embedder=self._embedder(),
                                    min_children=max(2, max_children // 2),
                                    max_children=max_children)

    def _embedder(self) -> TextEmbedder:
        if self._embedder_factory is not None:
            return self._embedder_factory()
        from stackroute.server.embeddings.vector_cache import CachedEmbedder

        return CachedEmbedder.for_default_model()


def _mark_client_executed(node: dict[str, Any]) -> None:
    """The client runs these tools, never the server: each waits at a gate, so a session
    over the catalog pauses at every call and takes its result through the sessions API
    (`POST /v1/sessions/{id}/result`); a chat request hands it to the client as a tool_call.
    """
    for child in node.get("children", ()):
        if "children" in child:
            _mark_client_executed(child)
        else:
            child["sensitive"] = True


def _function_name(leaf: Node) -> str:
    original = leaf.metadata.get("original_name")
    return original if isinstance(original, str) else leaf.name


def tools_key(tools: Sequence[Mapping[str, Any]]) -> str:
    """The content hash of a tools list (key order and whitespace do not matter).

    >>> tools_key([{"type": "function", "function": {"name": "a"}}])[:12]
    'caa5bc6f0e9b'
    """
    canonical = json.dumps(list(tools), sort_keys=True, separators=(",", ":"),
                           ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()
