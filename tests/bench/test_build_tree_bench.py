"""The build-tree benchmark's helpers on a tiny catalog (no model, fake embedder)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from stackroute.bench.experiments.build_tree import (
    embedding_descent,
    gold_path_tokens,
    remap_gold_by_leaf_name,
)
from stackroute.runtime.catalog import build_tree
from stackroute.runtime.prompt import Prompt


class WordsEmbedder:
    """Bag of words over fixed random word vectors (deterministic)."""

    dim = 32

    def embed(self, texts: Sequence[str]) -> np.ndarray[Any, Any]:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"[a-z]+", text.lower()):
                seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:8], "little")
                out[i] += np.random.default_rng(seed).standard_normal(self.dim)
            out[i] /= max(float(np.linalg.norm(out[i])), 1e-9)
        return out


class WordCounter:
    def count_tokens(self, prompt: Prompt) -> int:
        return sum(len(m.content.split()) for m in prompt.messages)


def leaf(name: str, description: str) -> dict[str, Any]:
    return {"name": name, "description": description}


def router(name: str, description: str, *children: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "description": description, "children": list(children)}


TREE = build_tree(router(
    "root", "",
    router("weather", "weather forecasts", leaf("forecast", "weather forecast for a city"),
           leaf("storm_alert", "storm warnings")),
    router("money", "bank payments", leaf("pay", "pay a bank bill"),
           leaf("transfer", "bank transfer")),
))


@dataclass(frozen=True)
class Q:
    id: str
    query: str
    gold: tuple[str, ...]


def test_remap_gold_by_leaf_name() -> None:
    queries = [Q("a", "x", ("Finance/Banking/pay",)), Q("b", "y", ("Nowhere/missing",))]
    assert [q.gold for q in remap_gold_by_leaf_name(queries, TREE)] == [
        ("money/pay",), ("Nowhere/missing",)]


def test_embedding_descent_and_gold_path_tokens() -> None:
    queries = [Q("a", "weather forecast city", ("weather/forecast",)),
               Q("b", "bank transfer", ("money/transfer",))]
    assert embedding_descent(TREE, WordsEmbedder(), queries) == {
        "num_queries": 2, "description_descent_accuracy": 1.0,
        "centroid_descent_accuracy": 1.0}
    tokens = gold_path_tokens(TREE, WordCounter(), queries, clip=None)
    assert tokens["gold_path_queries"] == 2
    assert tokens["gold_path_prompt_tokens_mean"] > tokens["gold_path_last_prompt_tokens_mean"] > 0
