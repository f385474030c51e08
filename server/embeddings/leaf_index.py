"""Leaf evidence: how well each leaf matches a request, and that match propagated up the
capability tree (a router is as good as its subtree).

A leaf's score mixes two signals, as production tool search does:
- dense: cosine between the request's sentence embedding and the leaf's text (name split into
  words, the description, the parameters' names and descriptions), or any of the leaf's
  `examples` (FORMAT.md: requests it serves), whichever is closest;
- lexical: BM25 over the same words (`lexical.py`), normalised to [0, 1] per request.
`score = (1 - lexical_weight) * dense + lexical_weight * lexical`. On Seal-Tools dev
(200 single-tool queries) the right leaf ranks first for 0.775 of requests by dense on name and
description alone, 0.795 with the parameters' text, and 0.925 mixed at 0.5 (top-5: 0.915 →
0.980); on semantic-overlap-64 dev 0.895 → 0.982.

The index embeds every leaf once per catalog and caches the vectors on disk under the
stackroute cache dir, keyed by a hash of the exact texts and the embedding model, so a catalog
loads its index in milliseconds the second time. Leaves are kept in depth-first order, so
every subtree is one contiguous span of rows and a router's score is a reduction over
`scores[start:end]`.

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
from collections import OrderedDict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from stackroute.runtime.tree import CapabilityTree, Node
from stackroute.server.embeddings.abbreviations import Abbreviations
from stackroute.server.embeddings.embedder import TextEmbedder
from stackroute.server.embeddings.lexical import Bm25Index, tokens
from stackroute.server.embeddings.words import name_words

log = logging.getLogger(__name__)

INDEX_FORMAT_VERSION = 2  # 2: parameters' text, examples
DEFAULT_LEXICAL_WEIGHT = 0.5  # measured on the dev splits (module docstring)


class Aggregate(StrEnum):
    """How leaf scores become a router's score."""

    MAX = "max"  # the best leaf below
    SOFTMAX = "softmax"  # temperature * log-sum-exp(score / temperature) over the leaves below


def leaf_text(leaf: Node) -> str:
    """What a leaf is embedded as: its name split into words, its description, then its
    parameters' names and descriptions.

    >>> leaf_text(Node("getWaterQuality", ("x",), "Water quality of a lake."))
    'get water quality: Water quality of a lake.'
    >>> leaf_text(Node("send", ("send",), "Send money.", parameters={"properties": {
    ...     "payee_name": {"type": "string", "description": "who gets it"}, "amount": {}}}))
    'send: Send money.; arguments: payee name (who gets it), amount'
    """
    words = name_words(leaf.name)
    description = " ".join(leaf.description.split())
    text = f"{words}: {description}" if description else words
    properties = (leaf.parameters or {}).get("properties")
    if isinstance(properties, Mapping) and properties:
        described = []
        for name, schema in properties.items():
            about = schema.get("description") if isinstance(schema, Mapping) else None
            label = name_words(str(name))
            described.append(f"{label} ({' '.join(about.split())})"
                             if isinstance(about, str) and about.strip() else label)
        text += "; arguments: " + ", ".join(described)
    return text


def leaf_examples(leaf: Node) -> list[str]:
    """The catalog's example requests for a leaf (FORMAT.md `examples`), if any."""
    examples = leaf.metadata.get("examples")
    if not isinstance(examples, list):
        return []
    return [" ".join(e.split()) for e in examples if isinstance(e, str) and e.strip()]


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
    example_vectors: NDArray[np.float32] | None = None  # [num_examples, dim], unit rows
    example_rows: NDArray[np.int64] | None = None  # [num_examples]: each one's leaf row
    lexical: Bm25Index | None = None
    lexical_weight: float = 0.0
    words: frozenset[str] = frozenset()  # the leaves' words (`lexical.tokens`), examples too

    @classmethod
    def from_tree(cls, tree: CapabilityTree, embedder: TextEmbedder, *, model_id: str,
                  cache_dir: Path | None = None,
                  lexical_weight: float = DEFAULT_LEXICAL_WEIGHT) -> LeafIndex:
        """Embed `tree`'s leaves and their examples, or read them back from `cache_dir` when
        the texts and model are unchanged; index their words for BM25."""
        leaves, spans = _depth_first(tree.root)
        texts = [leaf_text(leaf) for leaf in leaves]
        examples = [(row, e) for row, leaf in enumerate(leaves) for e in leaf_examples(leaf)]
        all_texts = texts + [e for _, e in examples]
        digest = _digest(model_id, [leaf.path_str for leaf in leaves]
                         + [f"{leaves[row].path_str}#example" for row, _ in examples], all_texts)
        vectors = _read_cached(cache_dir, digest, len(all_texts))
        if vectors is None:
            vectors = embedder.embed(all_texts).astype(np.float32)
            _write_cached(cache_dir, digest, vectors)
        report = tuple(_report_path(leaf) for leaf in leaves)
        words = [" ".join([text, *leaf_examples(leaf)])
                 for text, leaf in zip(texts, leaves, strict=True)]
        lexical = Bm25Index.from_texts(words) if lexical_weight > 0 else None
        return cls(paths=tuple(leaf.path_str for leaf in leaves), report_paths=report,
                   vectors=vectors[:len(leaves)], spans=spans,
                   example_vectors=vectors[len(leaves):] if examples else None,
                   example_rows=np.array([row for row, _ in examples], dtype=np.int64)
                   if examples else None,
                   lexical=lexical, lexical_weight=lexical_weight if lexical else 0.0,
                   words=frozenset(w for text in words for w in tokens(text)))

    @property
    def num_leaves(self) -> int:
        return len(self.paths)

    def evidence(self, query_vector: NDArray[np.float32], request: str = "") -> Evidence:
        """Every leaf's score for one request: its embedding `[dim]` and, for the lexical
        part, its text."""
        query = query_vector.astype(np.float32)
        dense = self.vectors @ query  # [num_leaves]
        if self.example_vectors is not None and self.example_rows is not None:
            np.maximum.at(dense, self.example_rows, self.example_vectors @ query)
        if self.lexical is None or not request:
            return Evidence(index=self, scores=dense)
        weight = np.float32(self.lexical_weight)
        scores = (1 - weight) * dense + weight * self.lexical.scores(request)
        return Evidence(index=self, scores=scores.astype(np.float32))


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
                 dictionary: Collection[str] = (), max_requests: int = 256) -> None:
        self.index = index
        self.embedder = embedder
        self.max_requests = max_requests
        # `dictionary`: whole words a request writes as themselves; the other words that
        # abbreviate the catalog's are read as what they stand for (none without one)
        self.abbreviations = Abbreviations.of(index.words, dictionary)
        # each request text's vector and reading, the last `max_requests`
        self._seen: OrderedDict[str, tuple[NDArray[np.float32], str]] = OrderedDict()

    def reading(self, text: str) -> str:
        """`text` as the evidence reads it: its abbreviations of the catalog's words written
        out ("van 12 odo 48,210 mi": "van 12 odometer 48,210 mi")."""
        return self.abbreviations.expand(text)

    def for_request(self, text: str) -> Evidence:
        seen = self._seen.get(text)
        if seen is None:
            reading = self.reading(text)
            seen = self.embedder.embed([reading])[0], reading
            self._seen[text] = seen
            if len(self._seen) > self.max_requests:
                self._seen.popitem(last=False)
        else:
            self._seen.move_to_end(text)
        return self.index.evidence(*seen)


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
