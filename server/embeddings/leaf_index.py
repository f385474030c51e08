"""Leaf evidence: how well each leaf's description matches a request, by sentence embeddings,
and that match propagated up the capability tree (a router is as good as its subtree).

The index embeds every leaf once per catalog (name split into words, then the description)
and caches the vectors on disk under the stackroute cache dir, keyed by a hash of the exact
texts and the embedding model, so a catalog loads its index in milliseconds the second time.
Leaves are kept in depth-first order, so every subtree is one contiguous span of rows and a
router's score is a reduction over `scores[start:end]`.

>>> import numpy as np
>>> index = LeafIndex(paths=("r/a", "r/b"), report_paths=("r/a", "r/b"),
...                   vectors=np.eye(2, dtype=np.float32),
...                   spans={"": (0, 2), "r": (0, 2), "r/a": (0, 1), "r/b": (1, 2)})
>>> evidence = index.evidence(np.array([0.75, 0.5], dtype=np.float32))
>>> evidence.best(), evidence.node_score("r"), evidence.outside_score("r/a")
(('r/a', 0.75), 0.75, 0.5)
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Protocol

import numpy as np
from numpy.typing import NDArray
from stackroute.runtime.tree import CapabilityTree, Node

log = logging.getLogger(__name__)

INDEX_FORMAT_VERSION = 1
_WORD_BREAK = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|[_\-./]+")


class Aggregate(StrEnum):
    """How leaf scores become a router's score."""

    MAX = "max"  # the best leaf below
    SOFTMAX = "softmax"  # temperature * log-sum-exp(score / temperature) over the leaves below


class TextEmbedder(Protocol):
    """What the index needs from an embedder (`stackroute.server.embeddings.embedder.Embedder`)."""

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Unit vectors `[len(texts), dim]`."""
        ...


def leaf_text(leaf: Node) -> str:
    """What a leaf is embedded as: its name split into words, then its description.

    >>> leaf_text(Node("getWaterQuality", ("x",), "Water quality of a lake."))
    'get water quality: Water quality of a lake.'
    """
    words = " ".join(w.lower() for w in _WORD_BREAK.split(leaf.name) if w)
    description = " ".join(leaf.description.split())
    return f"{words}: {description}" if description else words


@dataclass(frozen=True)
class LeafIndex:
    """Leaf embeddings of one catalog, in depth-first order.

    `paths` are node paths; `report_paths` are what a run records for a call (a flat twin's
    leaf reports its `tree_path`). `spans[node_path]` is the `[start, end)` row range of the
    leaves under a router.
    """

    paths: tuple[str, ...]
    report_paths: tuple[str, ...]
    vectors: NDArray[np.float32]  # [num_leaves, dim], unit rows
    spans: Mapping[str, tuple[int, int]]

    @classmethod
    def from_tree(cls, tree: CapabilityTree, embedder: TextEmbedder, *, model_id: str,
                  cache_dir: Path | None = None) -> LeafIndex:
        """Embed `tree`'s leaves, or read them back from `cache_dir` when the texts and model
        are unchanged."""
        leaves, spans = _depth_first(tree.root)
        texts = [leaf_text(leaf) for leaf in leaves]
        digest = _digest(model_id, [leaf.path_str for leaf in leaves], texts)
        vectors = _read_cached(cache_dir, digest, len(leaves))
        if vectors is None:
            vectors = embedder.embed(texts).astype(np.float32)
            _write_cached(cache_dir, digest, vectors)
        report = tuple(_report_path(leaf) for leaf in leaves)
        return cls(paths=tuple(leaf.path_str for leaf in leaves), report_paths=report,
                   vectors=vectors, spans=spans)

    @property
    def num_leaves(self) -> int:
        return len(self.paths)

    def evidence(self, query_vector: NDArray[np.float32]) -> Evidence:
        """Cosine scores of every leaf for one embedded request `[dim]`."""
        return Evidence(index=self, scores=self.vectors @ query_vector.astype(np.float32))


@dataclass(frozen=True)
class Evidence:
    """One request's leaf scores (cosine, `[num_leaves]`) and reductions over subtrees."""

    index: LeafIndex
    scores: NDArray[np.float32]

    def without(self, report_paths: Iterable[str]) -> Evidence:
        """The same evidence with the given leaves (a run's calls so far) scored -inf."""
        drop = set(report_paths)
        if not drop:
            return self
        scores = self.scores.copy()
        for row, path in enumerate(self.index.report_paths):
            if path in drop:
                scores[row] = -np.inf
        return Evidence(index=self.index, scores=scores)

    def node_score(self, path: str, *, aggregate: Aggregate = Aggregate.MAX,
                   temperature: float = 0.05) -> float:
        """A node's score: a leaf's own, or the reduction of its subtree's leaves."""
        start, end = self._span(path)
        return _reduce(self.scores[start:end], aggregate, temperature)

    def outside_score(self, path: str) -> float:
        """The best leaf not under `path` (-inf when there is none)."""
        start, end = self._span(path)
        rest = np.concatenate([self.scores[:start], self.scores[end:]])
        return float(rest.max()) if rest.size else -math.inf

    def best(self, under: str = "") -> tuple[str, float]:
        """The best leaf under `under` (node path) and its score."""
        start, end = self._span(under)
        row = start + int(np.argmax(self.scores[start:end]))
        return self.index.paths[row], float(self.scores[row])

    def top(self, k: int, under: str = "") -> list[tuple[str, float]]:
        start, end = self._span(under)
        rows = start + np.argsort(-self.scores[start:end], kind="stable")[:k]
        return [(self.index.paths[r], float(self.scores[r])) for r in rows
                if np.isfinite(self.scores[r])]

    def _span(self, path: str) -> tuple[int, int]:
        span = self.index.spans.get(path)
        if span is None:
            raise KeyError(f"no node at path {path!r} in the leaf index")
        return span


class EvidenceSource:
    """Evidence for requests of one catalog: embeds each distinct request text once (a run
    asks at every step) and keeps the last `max_requests` embeddings."""

    def __init__(self, index: LeafIndex, embedder: TextEmbedder, *,
                 max_requests: int = 256) -> None:
        self.index = index
        self.embedder = embedder
        self.max_requests = max_requests
        self._vectors: OrderedDict[str, NDArray[np.float32]] = OrderedDict()

    def for_request(self, text: str) -> Evidence:
        vector = self._vectors.get(text)
        if vector is None:
            vector = self.embedder.embed([text])[0]
            self._vectors[text] = vector
            if len(self._vectors) > self.max_requests:
                self._vectors.popitem(last=False)
        else:
            self._vectors.move_to_end(text)
        return self.index.evidence(vector)


def _reduce(scores: NDArray[np.float32], aggregate: Aggregate, temperature: float) -> float:
    finite = scores[np.isfinite(scores)]
    if finite.size == 0:
        return -math.inf
    if aggregate is Aggregate.MAX:
        return float(finite.max())
    scaled = finite.astype(np.float64) / temperature
    top = scaled.max()
    return float(temperature * (top + math.log(float(np.exp(scaled - top).sum()))))


def _depth_first(root: Node) -> tuple[list[Node], dict[str, tuple[int, int]]]:
    leaves: list[Node] = []
    spans: dict[str, tuple[int, int]] = {}

    def visit(node: Node) -> None:
        start = len(leaves)
        if node.is_leaf and node.depth > 0:
            leaves.append(node)
        for child in node.children:
            visit(child)
        spans[node.path_str] = (start, len(leaves))

    visit(root)  # catalogs are at most a few levels deep: recursion is safe
    return leaves, spans


def _report_path(leaf: Node) -> str:
    tree_path = leaf.metadata.get("tree_path")
    return tree_path if isinstance(tree_path, str) else leaf.path_str


def _digest(model_id: str, paths: Sequence[str], texts: Sequence[str]) -> str:
    h = hashlib.sha256(f"leaf-index:{INDEX_FORMAT_VERSION}:{model_id}\n".encode())
    for path, text in zip(paths, texts, strict=True):
        h.update(f"{path}\t{text}\n".encode())
    return h.hexdigest()[:24]


def _cache_file(cache_dir: Path, digest: str) -> Path:
    return cache_dir / "evidence" / f"leaves-{digest}.npy"


def _read_cached(cache_dir: Path | None, digest: str, num_leaves: int,
                 ) -> NDArray[np.float32] | None:
    if cache_dir is None:
        return None
    path = _cache_file(cache_dir, digest)
    try:
        vectors: NDArray[np.float32] = np.load(path, allow_pickle=False)
    except (OSError, ValueError):
        return None
    if vectors.ndim != 2 or vectors.shape[0] != num_leaves:
        log.warning("ignoring leaf index %s: shape %s, expected %d rows", path, vectors.shape,
                    num_leaves)
        return None
    return vectors.astype(np.float32, copy=False)


def _write_cached(cache_dir: Path | None, digest: str, vectors: NDArray[np.float32]) -> None:
    if cache_dir is None:
        return
    path = _cache_file(cache_dir, digest)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial.npy")
        np.save(partial, vectors, allow_pickle=False)
        partial.replace(path)  # atomic: a reader never sees half a file
    except OSError as e:  # a read-only cache dir costs a re-embed next time, nothing more
        log.warning("could not cache the leaf index at %s: %s", path, e)
