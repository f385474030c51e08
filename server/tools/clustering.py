"""Balanced partitions of unit vectors: recursive k-means with size bounds, numpy only.

`partition` turns n items into a tree whose routers have between `min_children` and
`max_children` children (the minimum is kept wherever the counts allow it: 13 items make two
groups of 7 and 6, never six groups of two). Each level is a k-means over cosine similarity
whose assignment step fills clusters greedily by similarity up to a size cap and then moves the
cheapest items into clusters below their floor. Deterministic for a given seed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray


@dataclass(frozen=True)
class Group:
    """A router to be: either leaves (`members`, item indices) or sub-`groups`."""

    members: tuple[int, ...] = ()
    groups: tuple[Group, ...] = ()

    @property
    def items(self) -> tuple[int, ...]:
        return self.members + tuple(i for g in self.groups for i in g.items)


@dataclass(frozen=True, kw_only=True)
class PartitionOptions:
    min_children: int = 6
    max_children: int = 12
    seed: int = 0
    num_restarts: int = 3  # k-means runs per split; the tightest one is kept
    max_iterations: int = 30
    slack: float = 0.5  # inner groups' sizes stay within (1 ± slack) × the mean size

    def __post_init__(self) -> None:
        if not 2 <= self.min_children <= self.max_children:
            raise ValueError(f"need 2 <= min_children <= max_children, got "
                             f"{self.min_children} and {self.max_children}")
        if self.num_restarts < 1 or self.max_iterations < 1:
            raise ValueError("num_restarts and max_iterations must be at least 1")


def partition(vectors: NDArray[np.float32], options: PartitionOptions) -> Group:
    """The root group over all rows of `vectors` (`[n, dim]`, unit rows)."""
    rng = np.random.default_rng(options.seed)
    return _split(vectors, np.arange(len(vectors)), options, rng)


def levels_needed(n: int, max_children: int) -> int:
    """Routing levels a balanced tree of `n` leaves needs at this branching bound.

    >>> levels_needed(12, 12), levels_needed(13, 12), levels_needed(4076, 12)
    (1, 2, 4)
    """
    height = 1
    while max_children ** height < n:
        height += 1
    return height


def _split(vectors: NDArray[np.float32], items: NDArray[np.int64], options: PartitionOptions,
           rng: np.random.Generator) -> Group:
    n = len(items)
    if n <= options.max_children:
        return Group(members=tuple(int(i) for i in items))
    height = levels_needed(n, options.max_children)
    capacity = options.max_children ** (height - 1)  # leaves one child subtree can hold
    k = min(max(math.ceil(n / capacity), options.min_children), options.max_children)
    # Every child should be able to keep min_children per router below it.
    k = max(2, min(k, n // options.min_children ** (height - 1)))
    mean = n / k
    hi = min(capacity, math.ceil(mean * (1 + options.slack)))
    # A child below min_children ** (height - 1) leaves cannot keep min_children per router.
    lo = max(1, math.floor(mean * (1 - options.slack)),
             min(options.min_children ** (height - 1), n // k))
    labels = balanced_kmeans(vectors[items], k, lo=lo, hi=hi, options=options, rng=rng)
    groups: list[Group] = []
    loose: list[int] = []
    for c in range(k):
        part = items[labels == c]
        if len(part) == 1:  # never a router with one child: the leaf joins the parent
            loose.append(int(part[0]))
        elif len(part):
            groups.append(_split(vectors, part, options, rng))
    groups.sort(key=lambda g: min(g.items))
    return Group(members=tuple(loose), groups=tuple(groups))


def balanced_kmeans(x: NDArray[np.float32], k: int, *, lo: int, hi: int,
                    options: PartitionOptions, rng: np.random.Generator) -> NDArray[np.int64]:
    """Cluster labels `[n]` with every cluster's size in `[lo, hi]` (needs k*lo <= n <= k*hi)."""
    n = len(x)
    if not k * lo <= n <= k * hi:
        raise ValueError(f"cannot split {n} items into {k} clusters of {lo}..{hi}")
    best_score, best_labels = -np.inf, np.zeros(n, dtype=np.int64)
    for _ in range(options.num_restarts):
        centroids = _kmeans_plus_plus(x, k, rng)
        labels = np.full(n, -1, dtype=np.int64)
        for _ in range(options.max_iterations):
            new = _assign(x @ centroids.T, lo, hi)
            if np.array_equal(new, labels):
                break
            labels = new
            centroids = _centroids(x, labels, k)
        score = float(np.sum(x * centroids[labels]))  # total cosine to own centroid
        if score > best_score + 1e-9:
            best_score, best_labels = score, labels
    return best_labels


def _kmeans_plus_plus(x: NDArray[np.float32], k: int, rng: np.random.Generator,
                      ) -> NDArray[np.float32]:
    """Greedy k-means++ seeding: each new centre is the best of a few candidates drawn in
    proportion to their squared cosine distance from the centres so far (plain k-means++
    often puts two seeds in one topic when topics are only ~2x farther apart than items)."""
    num_trials = 2 + int(math.log(k))
    chosen = [int(rng.integers(len(x)))]
    distance = np.clip(1.0 - x @ x[chosen[0]], 0.0, None) ** 2  # to the nearest centre
    for _ in range(1, k):
        total = float(distance.sum())
        if total <= 0:
            candidates = rng.integers(len(x), size=num_trials)
        else:
            candidates = rng.choice(len(x), size=num_trials, p=distance / total)
        trial = np.minimum(distance[None, :],
                           np.clip(1.0 - x[candidates] @ x.T, 0.0, None) ** 2)  # [trials, n]
        best = int(np.argmin(trial.sum(axis=1)))
        chosen.append(int(candidates[best]))
        distance = trial[best]
    return x[chosen].copy()


def _assign(sims: NDArray[np.float32], lo: int, hi: int) -> NDArray[np.int64]:
    """Capacity-bounded assignment, then top-up of clusters below `lo` with the items that
    lose least by moving. `sims` is `[n, k]`.

    Each round every unassigned item proposes to its most similar open cluster, and a cluster
    takes its most similar proposers up to `hi` (at most k rounds: each fills a cluster)."""
    n, k = sims.shape
    labels = np.full(n, -1, dtype=np.int64)
    counts = np.zeros(k, dtype=np.int64)
    is_open = np.ones(k, dtype=bool)
    while True:
        unassigned = np.flatnonzero(labels < 0)
        if not len(unassigned):
            break
        masked = np.where(is_open, sims[unassigned], -np.inf)
        proposal = np.argmax(masked, axis=1)
        for c in np.unique(proposal).tolist():
            bidders = unassigned[proposal == c]
            room = int(hi - counts[c])
            if len(bidders) > room:
                bidders = bidders[np.argsort(-sims[bidders, c], kind="stable")[:room]]
            labels[bidders] = c
            counts[c] += len(bidders)
            is_open[c] = counts[c] < hi
    rows = np.arange(n)
    for c in range(k):
        while counts[c] < lo:
            loss = sims[rows, labels] - sims[:, c]
            loss[(labels == c) | (counts[labels] <= lo)] = np.inf
            i = int(np.argmin(loss))
            counts[labels[i]] -= 1
            labels[i] = c
            counts[c] += 1
    return labels


def _centroids(x: NDArray[np.float32], labels: NDArray[np.int64], k: int,
               ) -> NDArray[np.float32]:
    one_hot = (labels[None, :] == np.arange(k)[:, None]).astype(np.float32)  # [k, n]
    out: NDArray[np.float32] = one_hot @ x  # [k, dim]
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return (out / np.where(norms > 0, norms, 1.0)).astype(np.float32)
