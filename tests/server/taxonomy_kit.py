"""Test doubles for the taxonomy, query-lint and tree-builder tests: an embedder with
deterministic vectors and a scripted engine. Both satisfy the protocols without inheriting."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray
from stackroute.runtime.prompt import Prompt
from stackroute.runtime.tree import CapabilityTree
from stackroute.runtime.usage import Usage
from stackroute.server.engines.base import (
    Constraint,
    EngineInfo,
    Generation,
    MenuResult,
    PrepareStats,
    SamplingOptions,
)

TOPICS = {  # topic -> its words: flat catalogs whose clusters are known
    "weather": ["forecast", "rain", "wind", "storm", "humidity", "temperature"],
    "banking": ["account", "loan", "deposit", "payment", "card", "mortgage"],
    "music": ["song", "album", "playlist", "lyrics", "artist", "concert"],
    "health": ["patient", "symptom", "doctor", "medication", "vaccine", "clinic"],
    "travel": ["flight", "hotel", "passport", "luggage", "airport", "itinerary"],
    "sports": ["match", "score", "league", "player", "coach", "stadium"],
    "cooking": ["recipe", "oven", "ingredient", "dessert", "spice", "kitchen"],
    "space": ["planet", "orbit", "rocket", "telescope", "satellite", "galaxy"],
}


def word_vector(word: str, dim: int) -> NDArray[np.float32]:
    seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:8], "little")
    v = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


class FakeEmbedder:
    """Bag of words: a text's vector is the normalised sum of one fixed random vector per
    lower-case word, so texts that share words are close and equal texts are equal."""

    def __init__(self, dim: int = 64) -> None:
        self.dim = dim
        self.num_calls = 0
        self.num_texts = 0

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self.num_calls += 1
        self.num_texts += len(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"[a-z0-9]+", text.lower()):
                out[i] += word_vector(word, self.dim)
            norm = np.linalg.norm(out[i])
            out[i] = out[i] / norm if norm > 0 else word_vector("<empty>", self.dim)
        return out


def request_of(prompt: Prompt | str) -> str:
    text = prompt if isinstance(prompt, str) else "\n".join(m.content for m in prompt.messages)
    match = re.search(r"Request: (.*)", text)
    return match.group(1).strip() if match else ""


class ScriptedEngine:
    """`choose` answers `script(request, options)`; `generate` pops the next scripted text."""

    def __init__(self, script: Callable[[str, tuple[str, ...]], str] | None = None,
                 texts: Sequence[str] = ()) -> None:
        self.info = EngineInfo(engine="scripted", model="scripted", max_context_tokens=4096)
        self.script = script or (lambda request, options: options[0])
        self.texts = list(texts)
        self.generate_calls: list[tuple[Prompt | str, Constraint | None]] = []

    def count_tokens(self, prompt: Prompt | str) -> int:
        return len(prompt if isinstance(prompt, str) else
                   " ".join(m.content for m in prompt.messages).split())

    def prepare(self, tree: CapabilityTree) -> PrepareStats:
        return PrepareStats(num_menus=0, num_schemas=0, compile_ms=0.0)

    def choose(self, prompt: Prompt, options: Sequence[str], *,
               option_bias: Mapping[str, float] | None = None) -> MenuResult:
        choice = self.script(request_of(prompt), tuple(options))
        rest = (1.0 - 0.7) / max(len(options) - 1, 1)
        probs = {o: (0.7 if o == choice else rest) for o in options}
        return MenuResult(choice=choice, probabilities=probs, margin=math.log(0.7 / rest),
                          usage=Usage(model_calls=1, prompt_tokens=self.count_tokens(prompt),
                                      prefill_tokens=5, cached_tokens=0))

    def generate(self, prompt: Prompt | str, *, constraint: Constraint | None = None,
                 sampling: SamplingOptions | None = None) -> Generation:
        self.generate_calls.append((prompt, constraint))
        text = self.texts.pop(0) if self.texts else "group"
        return Generation(text=text, finish_reason="stop", usage=Usage(model_calls=1))

    def metrics(self) -> dict[str, float]:
        return {}


def leaf(name: str, description: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "description": description, **extra}


def router(name: str, description: str, *children: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "description": description, "children": list(children)}
