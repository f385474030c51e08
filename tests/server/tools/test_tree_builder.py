"""build-tree: balanced k-means bounds, the built tree's shape, names, determinism and
validity on a synthetic flat catalog (tier a, fake embedder; a scripted engine for names)."""

from __future__ import annotations

import itertools
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from doubles import RequestScriptEngine
from stackroute.runtime.catalog import RESERVED_NAMES, build_tree, load_catalog
from stackroute.runtime.errors import CatalogError, InputError
from stackroute.runtime.tree import Node
from stackroute.server.tools.clustering import (
    PartitionOptions,
    _assign,
    balanced_kmeans,
    levels_needed,
    partition,
)
from stackroute.server.tools.router_naming import (
    ROUTER_NAME_PATTERN,
    describe_router,
    name_from_words,
)
from stackroute.server.tools.tree_builder import build_tree_file, build_tree_from_flat
from taxonomy_kit import TOPICS, leaf, router, topic_embedder


def synthetic_flat(per_topic: int = 20, num_topics: int = 8) -> dict[str, Any]:
    """`num_topics` topics x `per_topic` leaves; each leaf names its topic and three of its
    six words (the 20 ways in turn)."""
    children = []
    for topic, words in list(TOPICS.items())[:num_topics]:
        triples = list(itertools.combinations(words, 3))
        for i in range(per_topic):
            some = " ".join(triples[i % len(triples)])
            children.append(leaf(f"{topic}{i}", f"{topic} {some} tool number {i}",
                                 tree_path=f"{topic}/{topic}{i}"))
    return router("flat", "Everything in one menu.", *children)


def _leaves(node: Node) -> list[Node]:
    return [node] if node.is_leaf else [x for c in node.children for x in _leaves(c)]


def routers(node: Node) -> list[Node]:
    out = [node] if node.children else []
    for c in node.children:
        out.extend(routers(c))
    return out


@pytest.mark.parametrize(("n", "max_children", "expected"), [
    (1, 12, 1), (12, 12, 1), (13, 12, 2), (144, 12, 2), (145, 12, 3), (4076, 12, 4),
    (4076, 8, 4), (100, 6, 3),
])
def test_levels_needed(n: int, max_children: int, expected: int) -> None:
    assert levels_needed(n, max_children) == expected


@pytest.mark.parametrize(("n", "k", "lo", "hi"), [
    (40, 4, 10, 10), (113, 10, 6, 12), (13, 2, 6, 10), (300, 6, 25, 75), (50, 7, 2, 12),
])
def test_balanced_kmeans_respects_bounds(n: int, k: int, lo: int, hi: int) -> None:
    rng = np.random.default_rng(n)
    x = rng.standard_normal((n, 16)).astype(np.float32)
    x[: n // 2] += 3.0  # one dense blob: unconstrained k-means would overfill a cluster
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    labels = balanced_kmeans(x, k, lo=lo, hi=hi, options=PartitionOptions(),
                             rng=np.random.default_rng(0))
    sizes = np.bincount(labels, minlength=k)
    assert sizes.sum() == n and sizes.min() >= lo and sizes.max() <= hi


def test_assign_table() -> None:
    sims = np.array([[0.9, 0.1], [0.8, 0.2], [0.7, 0.6], [0.1, 0.9]], dtype=np.float32)
    assert _assign(sims, lo=1, hi=4).tolist() == [0, 0, 0, 1]
    assert _assign(sims, lo=1, hi=2).tolist() == [0, 0, 1, 1]  # item 2 loses least moving
    assert _assign(sims, lo=2, hi=3).tolist() == [0, 0, 1, 1]


@pytest.mark.parametrize("num_leaves", [5, 12, 13, 40, 160])
def test_partition_shape(num_leaves: int) -> None:
    x = topic_embedder().embed([f"item {i} word{i % 7}" for i in range(num_leaves)])
    root = partition(x, PartitionOptions())
    assert sorted(root.items) == list(range(num_leaves))
    if num_leaves <= 12:
        assert root.members == root.items and not root.groups
    if num_leaves == 13:
        assert sorted(len(g.items) for g in root.groups) == [6, 7] and not root.members


def shape(node: dict[str, Any]) -> Any:
    return [(c["name"], shape(c)) if "children" in c else c["name"] for c in node["children"]]


def test_build_tree_from_flat_synthetic() -> None:
    doc = synthetic_flat(per_topic=40, num_topics=6)
    out = build_tree_from_flat(doc, embedder=topic_embedder())
    tree = build_tree(out)  # valid catalog
    leaves = list(tree.leaves())
    assert sorted(n.name for n in leaves) == sorted(c["name"] for c in doc["children"])
    assert {n.name: dict(n.metadata)["tree_path"] for n in leaves} == {
        c["name"]: c["tree_path"] for c in doc["children"]}  # leaves copied unchanged
    stats = tree.stats()
    assert stats.depth == 3 and stats.max_menu <= 12  # 12**2 < 240 leaves <= 12**3
    for r in routers(tree.root):
        assert 6 <= len(r.children) <= 12, (r.path_str, len(r.children))
        if r.depth > 0:
            assert re.fullmatch(ROUTER_NAME_PATTERN, r.name) and r.name.upper() not in \
                RESERVED_NAMES
            assert r.description
        names = [c.name for c in r.children]
        assert len(set(names)) == len(names)
    # 6 topics of 40 under a root of 6: each top-level router holds one topic.
    for top in tree.root.children:
        topics = Counter(re.sub(r"\d+$", "", n.name) for n in _leaves(top))
        assert len(topics) == 1, (top.name, topics)
    assert out["metadata"]["built_by"]["namer"] == "topic words"


def test_build_tree_is_deterministic() -> None:
    doc = synthetic_flat(per_topic=15)
    first = build_tree_from_flat(doc, embedder=topic_embedder(), seed=3)
    assert build_tree_from_flat(doc, embedder=topic_embedder(), seed=3) == first
    # A CapabilityTree in gives the same tree (its leaves keep their extra keys as metadata).
    assert shape(build_tree_from_flat(build_tree(doc), embedder=topic_embedder(), seed=3)) == \
        shape(first)
    assert shape(build_tree_from_flat(doc, embedder=topic_embedder(), seed=4)) != shape(first)


@pytest.mark.parametrize(("min_children", "max_children"), [(2, 4), (3, 8), (6, 12)])
def test_build_tree_bounds(min_children: int, max_children: int) -> None:
    out = build_tree_from_flat(synthetic_flat(per_topic=10), embedder=topic_embedder(),
                               min_children=min_children, max_children=max_children)
    for r in routers(build_tree(out).root):
        assert min_children <= len(r.children) <= max_children


def test_build_tree_rejects_bad_bounds() -> None:
    with pytest.raises(InputError, match="min_children"):
        build_tree_from_flat(synthetic_flat(2), embedder=topic_embedder(), min_children=9,
                             max_children=4)


def test_repeated_leaf_names_from_a_tree_are_renamed() -> None:
    doc = router("r", "", router("a", "A", leaf("search", "search a things"),
                                 leaf("list", "list a things")),
                 router("b", "B", leaf("search", "search b things"), leaf("x", "x")))
    out = build_tree_from_flat(doc, embedder=topic_embedder())
    names = sorted(c["name"] for c in out["children"])
    assert names == ["list", "search", "search_2", "x"]
    assert next(c for c in out["children"] if c["name"] == "search_2")["built_from_name"] == \
        "search"


def test_model_names_routers_and_falls_back() -> None:
    doc = synthetic_flat(per_topic=2)  # 16 leaves: two routers
    engine = RequestScriptEngine(texts=["weather_and_rain", "weather_and_rain"])
    out = build_tree_from_flat(doc, embedder=topic_embedder(), engine=engine, min_children=2)
    names = [c["name"] for c in out["children"]]
    assert names[0] == "weather_and_rain" and names[1] != "weather_and_rain"  # taken: fallback
    assert [c.pattern for _, c in engine.generate_calls if c is not None] == [
        ROUTER_NAME_PATTERN] * 2
    assert out["metadata"]["built_by"]["namer"] == "scripted"
    build_tree(out)


@pytest.mark.parametrize(("words", "taken", "expected"), [
    (["weather", "forecast", "wind"], set(), "weather_forecast"),
    (["weather", "forecast", "wind"], {"weather_forecast"}, "weather"),
    (["weather", "forecast"], {"weather_forecast", "weather"}, "forecast"),
    (["done"], set(), "done_2"),
    (["x1"], set(), "x1_2"),
    (["a" * 40, "b"], set(), "a" * 31),
])
def test_name_from_words(words: list[str], taken: set[str], expected: str) -> None:
    assert name_from_words(words, taken) == expected


def test_describe_router_stays_short() -> None:
    names = [f"getSomethingQuiteLong{i}" for i in range(40)]
    text = describe_router(["alpha", "beta", "gamma"], names, 40, is_leaf_level=True)
    assert text.startswith("Alpha, beta and gamma. Tools: getSomethingQuiteLong0, ")
    assert text.endswith("more).") and len(text) <= 280


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_build_tree_file(tmp_path: Path, suffix: str) -> None:
    doc = synthetic_flat(per_topic=3)
    source = tmp_path / f"flat{suffix}"
    source.write_text(json.dumps(doc))  # JSON is YAML too
    out = build_tree_file(source, tmp_path / "out" / "built.json", embedder=topic_embedder())
    assert out["out"] == str(tmp_path / "out" / "built.json") and out["num_leaves"] == 24
    assert load_catalog(out["out"]).stats().num_leaves == 24


def test_build_tree_file_bad_input(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(CatalogError, match="cannot read catalog"):
        build_tree_file(bad, tmp_path / "o.json", embedder=topic_embedder())
    bad.write_text(json.dumps({"name": "r", "children": [{"name": "bad name"}]}))
    with pytest.raises(CatalogError, match="bad name"):
        build_tree_file(bad, tmp_path / "o.json", embedder=topic_embedder())
