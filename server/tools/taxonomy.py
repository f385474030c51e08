"""Taxonomy governance: where a capability tree makes routing hard, and what to change.

Overlap checks need sentence embeddings (so they live here, not in the torch-free runtime):
- `similar_siblings`: two sibling routers whose descriptions read alike (cosine of the
  description vectors), or whose subtrees hold alike tools (cosine of their leaf centroids,
  centred on the catalog's mean leaf vector so the "every tool retrieves information" direction
  that all descriptions share does not count as overlap).
- `duplicate_leaves`: leaves anywhere in the tree with identical or near-identical descriptions.
- `similar_names`: sibling names that differ by a plural or suffix, or where one name is
  contained in the other ("Travel" vs "Travel_and_Tourism").
- `repeated_name`: one router name under several parents (the same topic has several homes).
Structural checks (no embeddings): `wide_menu`, `deep_tree`, `single_child` chains and
`missing_description`. Each finding names its nodes and suggests a fix.

Default thresholds were set on seal-tools (146 fields, 2276 subfields; all-MiniLM-L6-v2). Of its
10,585 top-level sibling pairs the centred-centroid cosine has median -0.03, 99th percentile
0.50, 99.9th 0.72; the pairs the dataset's README lists as overlapping score 0.92
(Veterinary_Medicine/Veterinary_Science), 0.89 (Hospitality/Hospitality_Management), 0.78
(Travel/Travel_and_Tourism), 0.72 (Data_Analysis/Data_Science); the 19 pairs at 0.70 or above
are all plausible merges or broad/narrow pairs (Marketing/Digital_Marketing, Biology/Zoology).
Description cosine (median 0.42, 99th percentile 0.70) flags 0.85 and up: Tourism/Travel
(0.91) share no tools but read alike. Leaf descriptions: 0.96 and up are rewordings ("Create a
new fashion event" / "Create a fashion event"); just below (0.955) sit opposite verbs on one
object (send/receive an optical signal), which must not be flagged.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np
from numpy.typing import NDArray
from stackroute.runtime.lint import MAX_USEFUL_DEPTH, WIDE_MENU
from stackroute.runtime.tree import CapabilityTree, Node
from stackroute.server.embeddings.embedder import TextEmbedder
from stackroute.server.embeddings.words import split_name

log = logging.getLogger(__name__)


class FindingKind(StrEnum):
    SIMILAR_SIBLINGS = "similar_siblings"
    DUPLICATE_LEAVES = "duplicate_leaves"
    SIMILAR_NAMES = "similar_names"
    REPEATED_NAME = "repeated_name"
    WIDE_MENU = "wide_menu"
    DEEP_TREE = "deep_tree"
    SINGLE_CHILD = "single_child"
    MISSING_DESCRIPTION = "missing_description"


STRUCTURAL_KINDS = frozenset({FindingKind.WIDE_MENU, FindingKind.DEEP_TREE,
                              FindingKind.SINGLE_CHILD, FindingKind.MISSING_DESCRIPTION})


class Severity(StrEnum):
    WARNING = "warning"  # routing will go wrong here; fix before deploying
    INFO = "info"  # worth a look; often intended


@dataclass(frozen=True)
class Finding:
    """One governance finding: what, where (every node involved), how sure, and the fix."""

    kind: FindingKind
    severity: Severity
    paths: tuple[str, ...]
    message: str
    suggestion: str
    score: float | None = None  # the similarity behind it, where there is one

    @property
    def path(self) -> str:
        return self.paths[0] if self.paths else ""

    def __str__(self) -> str:
        return f"{self.kind.value} {self.path or '<root>'}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "severity": self.severity.value, "path": self.path,
                "paths": list(self.paths), "message": self.message,
                "suggestion": self.suggestion,
                "score": None if self.score is None else round(self.score, 4)}


@dataclass(frozen=True, kw_only=True)
class OverlapThresholds:
    """Cosines are of all-MiniLM-L6-v2 vectors; see the module docstring for their origin."""

    sibling_description: float = 0.85
    sibling_centroid: float = 0.70
    sibling_centroid_warning: float = 0.80  # content overlap this strong is a warning alone
    duplicate_leaf: float = 0.96
    max_menu: int = WIDE_MENU
    max_depth: int = MAX_USEFUL_DEPTH


DEFAULT_THRESHOLDS = OverlapThresholds()


def overlap_findings(tree: CapabilityTree, embedder: TextEmbedder | None, *,
                     thresholds: OverlapThresholds = DEFAULT_THRESHOLDS) -> list[Finding]:
    """Every overlap and structural finding, grouped by kind, strongest first.

    Without an embedder only the checks that need none run (similar siblings are skipped;
    duplicate leaves are found by identical text only)."""
    from stackroute.server.tools.tree_checks import (
        repeated_names,
        similar_names,
        structural_findings,
    )

    started = time.perf_counter()
    vectors = NodeVectors.from_tree(tree, embedder) if embedder is not None else None
    embedded = time.perf_counter()
    found = [
        *(similar_siblings(tree, vectors, thresholds) if vectors is not None else ()),
        *duplicate_leaves(tree, vectors, thresholds),
        *similar_names(tree),
        *repeated_names(tree),
        *structural_findings(tree, thresholds),
    ]
    log.info("overlap checks: %d findings; embedding %.1f s, checks %.1f s", len(found),
             embedded - started, time.perf_counter() - embedded)
    kinds, severities = list(FindingKind), list(Severity)
    # Within a kind: warnings first, then the shallowest (a top-level overlap misleads every
    # request; one between two one-tool subfields misleads few), then the strongest.
    return sorted(found, key=lambda f: (kinds.index(f.kind), severities.index(f.severity),
                                        min((p.count("/") + bool(p) for p in f.paths), default=0),
                                        -(f.score or 0.0), f.paths))


@dataclass
class NodeVectors:
    """Each node's description vector and each router's centred leaf centroid (unit)."""

    description: dict[str, NDArray[np.float32]]
    centroid: dict[str, NDArray[np.float32]]

    @classmethod
    def from_tree(cls, tree: CapabilityTree, embedder: TextEmbedder) -> NodeVectors:
        nodes = [n for n in tree.nodes() if n.depth > 0]
        texts = [n.description.strip() or " ".join(split_name(n.name)) for n in nodes]
        matrix = embedder.embed(texts) if texts else np.zeros((0, embedder.dim), np.float32)
        description = {n.path_str: matrix[i] for i, n in enumerate(nodes)}
        leaves = [n.path_str for n in nodes if n.is_leaf]
        mean = (np.mean([description[p] for p in leaves], axis=0) if leaves
                else np.zeros(embedder.dim, np.float32))
        sums: dict[str, tuple[NDArray[np.float32], int]] = {}

        def total(node: Node) -> tuple[NDArray[np.float32], int]:
            if node.is_leaf:
                return description[node.path_str] - mean, 1
            parts = [total(c) for c in node.children]
            out = (np.sum([v for v, _ in parts], axis=0), sum(n for _, n in parts))
            sums[node.path_str] = out
            return out

        total(tree.root)
        centroid = {p: _unit(v / n) for p, (v, n) in sums.items()}
        return cls(description=description, centroid=centroid)


def similar_siblings(tree: CapabilityTree, vectors: NodeVectors,
                     thresholds: OverlapThresholds) -> Iterable[Finding]:
    """Sibling routers that read alike or hold alike tools (sibling leaves are left to
    `duplicate_leaves`: related tools side by side are what a router is for)."""
    for parent in tree.routers():
        routers = [c for c in parent.children if not c.is_leaf]
        if len(routers) < 2:
            continue
        desc = np.stack([vectors.description[c.path_str] for c in routers])
        cent = np.stack([vectors.centroid[c.path_str] for c in routers])
        desc_sim, cent_sim = desc @ desc.T, cent @ cent.T
        hits = np.argwhere(np.triu((desc_sim >= thresholds.sibling_description)
                                   | (cent_sim >= thresholds.sibling_centroid), k=1))
        for i, j in hits:
            yield _sibling_finding(routers[i], routers[j], float(desc_sim[i, j]),
                                   float(cent_sim[i, j]), thresholds)


def _sibling_finding(a: Node, b: Node, desc: float, cent: float,
                     thresholds: OverlapThresholds) -> Finding:
    if a.path > b.path:
        a, b = b, a
    is_content = cent >= thresholds.sibling_centroid
    is_text = desc >= thresholds.sibling_description
    small, big = sorted((a, b), key=lambda n: (num_leaves(n), n.path))
    if is_content:
        suggestion = (f"merge {small.name!r} ({tool_count(small)}) into {big.name!r} "
                      f"({tool_count(big)}), or move the tools they share into one")
    else:
        suggestion = (f"rewrite the descriptions of {a.name!r} and {b.name!r} to say what "
                      "separates them (their tools differ; their descriptions do not)")
    return Finding(
        FindingKind.SIMILAR_SIBLINGS,
        Severity.WARNING if is_content and (
            is_text or cent >= thresholds.sibling_centroid_warning) else Severity.INFO,
        (a.path_str, b.path_str),
        f"siblings {a.name!r} and {b.name!r} overlap: leaf centroids {cent:.2f}, "
        f"descriptions {desc:.2f}", suggestion, score=max(cent, desc))


def duplicate_leaves(tree: CapabilityTree, vectors: NodeVectors | None,
                     thresholds: OverlapThresholds, *, block_rows: int = 2048,
                     ) -> Iterable[Finding]:
    """Groups of leaves (anywhere) with identical or (given vectors) near-identical
    descriptions."""
    leaves = [n for n in tree.leaves() if n.description.strip()]
    if len(leaves) < 2:
        return
    parent = list(range(len(leaves)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    best: dict[tuple[int, int], float] = {}
    matrix = (np.stack([vectors.description[n.path_str] for n in leaves]) if vectors is not None
              else np.zeros((0, 1), np.float32))  # [n, dim]
    for start in range(0, len(matrix), block_rows):  # [block, n] at a time bounds memory
        sims = matrix[start:start + block_rows] @ matrix.T
        for r, j in np.argwhere(sims >= thresholds.duplicate_leaf):
            i = start + int(r)
            if i < j:
                best[(i, int(j))] = float(sims[r, j])
                parent[root(i)] = root(int(j))
    same_text: dict[str, list[int]] = defaultdict(list)
    for i, n in enumerate(leaves):
        same_text[_norm_text(n.description)].append(i)
    for members in same_text.values():  # identical text, whatever the embedder says
        for i in members[1:]:
            best[(members[0], i)] = 1.0
            parent[root(members[0])] = root(i)
    groups: dict[int, list[int]] = defaultdict(list)
    for i in sorted({k for pair in best for k in pair}):
        groups[root(i)].append(i)
    for members in groups.values():
        nodes = [leaves[i] for i in members]
        score = min(s for (i, j), s in best.items() if i in members and j in members)
        is_identical = len({_norm_text(n.description) for n in nodes}) == 1
        names = ", ".join(repr(n.name) for n in nodes)
        num_parents = len({n.path[:-1] for n in nodes})
        where = f"under {num_parents} routers" if num_parents > 1 else "side by side"
        yield Finding(
            FindingKind.DUPLICATE_LEAVES, Severity.WARNING, tuple(n.path_str for n in nodes),
            f"{'identical' if is_identical else 'near-identical'} descriptions ({where}): "
            f"{names}: {nodes[0].description.strip()[:80]!r}",
            "keep one tool and drop the others (or alias them to it), or make each "
            "description say what it does differently", score=1.0 if is_identical else score)


def tool_count(node: Node) -> str:
    """The leaves under `node`, for messages.

    >>> tool_count(Node("send", ("send",), "Send money."))
    '1 tool'
    """
    n = num_leaves(node)
    return f"{n} tool{'s' if n != 1 else ''}"


def num_leaves(node: Node) -> int:
    return 1 if node.is_leaf else sum(num_leaves(c) for c in node.children)


def _norm_text(text: str) -> str:
    return " ".join(text.lower().split()).rstrip(".")


def _unit(v: NDArray[Any]) -> NDArray[np.float32]:
    norm = float(np.linalg.norm(v))
    return (v / norm).astype(np.float32) if norm > 0 else v.astype(np.float32)


@dataclass
class FindingSummary:
    """Counts by kind and severity, for reports."""

    by_kind: dict[str, dict[str, int]] = field(default_factory=dict)

    @classmethod
    def of(cls, findings: Iterable[Finding]) -> FindingSummary:
        out: dict[str, dict[str, int]] = {}
        for f in findings:
            row = out.setdefault(f.kind.value, {"total": 0, "warning": 0, "info": 0})
            row["total"] += 1
            row[f.severity.value] += 1
        return cls(out)
