"""`stackroute build-tree`: a capability tree from a flat catalog.

Leaves are embedded by their topic words (name and description without the verbs every tool
shares), centred, split by balanced k-means into a tree whose routers
have `min_children`..`max_children` children (`server.clustering`), and each router is named
and described from its members (`server.router_naming`). The leaves are copied unchanged. The
result is a catalog document (FORMAT.md) that `runtime.catalog.build_tree` accepts; it is
checked with it before it is returned.
"""

from __future__ import annotations

import copy
import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from stackroute.runtime.catalog import build_tree, catalog_format, parse_catalog_document
from stackroute.runtime.errors import CatalogError, InputError, Problem
from stackroute.runtime.tree import CapabilityTree, Node
from stackroute.server.embeddings.embedder import TextEmbedder
from stackroute.server.embeddings.vector_cache import CachedEmbedder
from stackroute.server.embeddings.words import split_name, topic_text
from stackroute.server.engines.base import Engine
from stackroute.server.tools.clustering import Group, PartitionOptions, partition
from stackroute.server.tools.router_naming import (
    WordStats,
    describe_router,
    model_name,
    name_from_words,
)

log = logging.getLogger(__name__)


def build_tree_from_flat(catalog: Mapping[str, Any] | CapabilityTree, *,
                         embedder: TextEmbedder, engine: Engine | None = None,
                         min_children: int = 6, max_children: int = 12,
                         seed: int = 0) -> dict[str, Any]:
    """A catalog document grouping every leaf of `catalog` (flat or not) into a balanced tree.

    Deterministic for a given seed, embedder and engine. With no engine, routers are named
    from their members' most distinctive words."""
    try:
        options = PartitionOptions(min_children=min_children, max_children=max_children,
                                   seed=seed)
    except ValueError as e:
        raise InputError(str(e)) from e
    source = catalog if isinstance(catalog, Mapping) else tree_document(catalog.root)
    tree = catalog if isinstance(catalog, CapabilityTree) else build_tree(source)  # validates
    leaves = _unique_names(_leaf_documents(source))
    if not leaves:
        raise InputError("the catalog has no leaves to group")
    started = time.perf_counter()
    texts = [topic_text(str(leaf["name"]), str(leaf.get("description") or ""))
             or " ".join(split_name(str(leaf["name"]))) or str(leaf["name"]) for leaf in leaves]
    vectors = np.asarray(embedder.embed(texts), dtype=np.float32)  # [n, dim], unit rows
    # Centred, so k-means splits on what tells tools apart, not on what all of them share.
    vectors = vectors - vectors.mean(axis=0)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-6)
    embedded = time.perf_counter()
    root_group = partition(vectors, options)
    grouped = time.perf_counter()
    builder = _Builder(leaves, WordStats(leaves), engine)
    children = builder.children(root_group)
    log.info("build-tree: %d leaves; embedding %.1f s, clustering %.1f s, naming %.1f s "
             "(%d model names, %d fallbacks)", len(leaves), embedded - started,
             grouped - embedded, time.perf_counter() - grouped, builder.num_model_names,
             builder.num_fallbacks)
    root = tree.root
    description = root.description.strip() or describe_router(
        builder.topics(root_group.items, root_group.items), [c["name"] for c in children],
        len(leaves), is_leaf_level=False)
    doc: dict[str, Any] = {
        "name": root.name,
        "description": description,
        "metadata": {
            "built_by": {"tool": "stackroute build-tree", "min_children": min_children,
                         "max_children": max_children, "seed": seed,
                         "embedding_model": getattr(embedder, "key", type(embedder).__name__),
                         "namer": engine.info.model if engine is not None else "topic words"},
            "source_metadata": dict(root.metadata),
        },
        "children": children,
    }
    build_tree(doc)  # a document this builder made that does not load is our bug: let it raise
    return doc


def build_tree_file(path: str | Path, out: str | Path, *, embedder: TextEmbedder | None = None,
                    engine: Engine | None = None, min_children: int = 6,
                    max_children: int = 12, seed: int = 0) -> dict[str, Any]:
    """`stackroute build-tree FLAT -o OUT`: read a catalog file (JSON or YAML), write the
    built tree as JSON, and return what was written (path and tree statistics)."""
    started = time.perf_counter()
    source = Path(path)
    try:
        text = source.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise CatalogError([Problem("", f"cannot read catalog {str(source)!r}: {e}")]) from e
    try:
        data = parse_catalog_document(text, fmt=catalog_format(source))
    except CatalogError as e:
        raise CatalogError([Problem(p.path, f"cannot read catalog {str(source)!r}: {p.message}")
                            for p in e.problems]) from e
    if not isinstance(data, Mapping):
        build_tree(data)  # raises the loader's own message
    embedder = embedder or CachedEmbedder.for_default_model()
    doc = build_tree_from_flat(data, embedder=embedder, engine=engine,
                               min_children=min_children, max_children=max_children, seed=seed)
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    stats = build_tree(doc).stats()
    return {"out": str(target), **stats.to_dict(),
            "seconds": round(time.perf_counter() - started, 2)}


@dataclass
class _Builder:
    leaves: list[dict[str, Any]]
    words: WordStats
    engine: Engine | None
    num_model_names: int = 0
    num_fallbacks: int = 0

    def children(self, group: Group) -> list[dict[str, Any]]:
        """The documents of `group`'s children: its loose leaves, then its routers (named
        together, so sibling names are unique)."""
        taken = {str(self.leaves[i]["name"]).lower() for i in group.members}
        out: list[dict[str, Any]] = [copy.deepcopy(self.leaves[i]) for i in group.members]
        for sub in group.groups:
            kids = self.children(sub)
            topics = self.topics(sub.items, group.items)
            name = None
            if self.engine is not None:
                name = model_name(self.engine, [self._member_line(k) for k in kids], topics,
                                  taken)
                self.num_model_names += name is not None
                self.num_fallbacks += name is None
            name = name or name_from_words(topics, taken)
            taken.add(name.lower())
            out.append({
                "name": name,
                "description": describe_router(topics, [k["name"] for k in kids],
                                               len(sub.items), is_leaf_level=not sub.groups),
                "children": kids,
            })
        return out

    def topics(self, items: Sequence[int], parent_items: Sequence[int]) -> list[str]:
        return self.words.topic_words(items, self.words.document_counts(parent_items),
                                      len(parent_items))

    def _member_line(self, child: Mapping[str, Any]) -> str:
        text = " ".join(str(child.get("description", "")).split())
        return f"{child['name']}: {text[:100]}"


def _leaf_documents(node: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every leaf document under `node`, depth first, in file order."""
    out: list[dict[str, Any]] = []
    stack: list[Mapping[str, Any]] = [node]
    while stack:
        n = stack.pop()
        if "children" in n:
            stack.extend(reversed(list(n["children"])))
        elif n is not node:
            out.append(dict(n))
    return out


def _unique_names(leaves: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Leaf names from different branches may repeat; in a rebuilt tree they may become
    siblings, so a repeat gets `_2`, `_3` (the old name stays in `built_from_name`)."""
    seen: set[str] = set()
    for leaf in leaves:
        name = str(leaf["name"])
        if name in seen:
            new = next(f"{name}_{i}" for i in range(2, 10_000) if f"{name}_{i}" not in seen)
            leaf["built_from_name"], leaf["name"] = name, new
            name = new
        seen.add(name)
    return leaves


def tree_document(node: Node) -> dict[str, Any]:
    """A node (and its subtree) back as a catalog document."""
    doc: dict[str, Any] = {"name": node.name, "description": node.description}
    if node.children:
        doc["children"] = [tree_document(c) for c in node.children]
        return doc
    if node.parameters is not None:
        doc["parameters"] = copy.deepcopy(dict(node.parameters))
    if node.sensitive:
        doc["sensitive"] = True
    if node.handler is not None:
        doc["handler"] = node.handler
    if node.metadata:
        doc["metadata"] = copy.deepcopy(dict(node.metadata))
    return doc
