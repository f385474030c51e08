"""Test doubles for routing with recovery: an engine with scripted option logits and a
bag-of-words embedder. Both satisfy their protocols without inheriting."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from stackroute.runtime.catalog import build_tree
from stackroute.runtime.prompt import Prompt
from stackroute.runtime.state import RunState
from stackroute.runtime.tree import CapabilityTree
from stackroute.runtime.usage import Usage
from stackroute.server.embeddings.leaf_index import EvidenceSource, LeafIndex
from stackroute.server.engines.base import (
    Constraint,
    EngineInfo,
    Generation,
    MenuResult,
    PrepareStats,
    PromptInput,
    SamplingOptions,
)
from stackroute.server.routing.contrast import NEUTRAL_REQUEST
from stackroute.server.routing.options import DraftSource, RouterOptions
from stackroute.server.routing.recovery import RecoveryOptions
from stackroute.server.routing.router import build_machine
from stackroute.server.tools.evaluate import Query, run_query

# root
# ├── billing      (router)  pay_water, pay_power
# ├── transfers    (router)  split_rent, send_gift, abroad (router: wire_abroad)
# └── weather      (leaf)
HOUSE_CATALOG: dict[str, Any] = {
    "name": "house",
    "description": "Household money.",
    "children": [
        {"name": "billing", "description": "Bills of the house.", "children": [
            {"name": "pay_water", "description": "Pay the water bill now."},
            {"name": "pay_power", "description": "Pay the electricity bill now."},
        ]},
        {"name": "transfers", "description": "Money between people.", "children": [
            {"name": "split_rent", "description": "Split the rent with a housemate."},
            {"name": "send_gift", "description": "Send a gift of money to a friend."},
            {"name": "abroad", "description": "Money sent to other countries.", "children": [
                {"name": "wire_abroad", "description": "Wire money to a bank abroad."},
            ]},
        ]},
        {"name": "weather", "description": "Weather forecast for a city."},
    ],
}


def house_tree() -> CapabilityTree:
    return build_tree(HOUSE_CATALOG)


Logits = Mapping[str, float] | Callable[[Prompt, tuple[str, ...]], Mapping[str, float]]


@dataclass
class ChooseCall:
    prompt: Prompt
    options: tuple[str, ...]
    bias: dict[str, float] | None

    @property
    def is_neutral(self) -> bool:
        return any(f"Request: {NEUTRAL_REQUEST}\n" in m.content for m in self.prompt.messages)


class FakeEngine:
    """Option logits from a table (missing options: 0) or a function of the prompt; the
    neutral prompt reads `neutral` instead. Greedy over `logit + bias`, ties to the first."""

    def __init__(self, logits: Logits, *, neutral: Mapping[str, float] | None = None) -> None:
        self.logits = logits
        self.neutral = neutral or {}
        self.info = EngineInfo(engine="fake", model="fake-model", max_context_tokens=100_000)
        self.calls: list[ChooseCall] = []

    def count_tokens(self, prompt: PromptInput) -> int:
        return _num_tokens(prompt)

    def prepare(self, tree: CapabilityTree) -> PrepareStats:
        return PrepareStats(num_menus=0, num_schemas=0, compile_ms=0.0)

    def choose(self, prompt: Prompt, options: Sequence[str], *,
               option_bias: Mapping[str, float] | None = None) -> MenuResult:
        call = ChooseCall(prompt, tuple(options), dict(option_bias) if option_bias else None)
        self.calls.append(call)
        table = self.neutral if call.is_neutral else (
            self.logits(prompt, tuple(options)) if callable(self.logits) else self.logits)
        scores = [table.get(o, 0.0) + (option_bias or {}).get(o, 0.0) for o in options]
        top = max(scores)
        weights = [math.exp(s - top) for s in scores]
        total = sum(weights)
        probabilities = {o: w / total for o, w in zip(options, weights, strict=True)}
        best = scores.index(top)
        rest = [s for i, s in enumerate(scores) if i != best]
        margin = top - max(rest) if rest else math.inf
        return MenuResult(choice=options[best], probabilities=probabilities, margin=margin,
                          usage=Usage(model_calls=1, prompt_tokens=_num_tokens(prompt),
                                      prefill_tokens=_num_tokens(prompt)))

    def generate(self, prompt: PromptInput, *, constraint: Constraint | None = None,
                 sampling: SamplingOptions | None = None) -> Generation:
        return Generation(text="{}", finish_reason="stop", usage=Usage(model_calls=1))

    def metrics(self) -> dict[str, float]:
        return {}

    def routing_calls(self) -> list[ChooseCall]:
        return [c for c in self.calls if not c.is_neutral]


class WordEmbedder:
    """Bag of words hashed into 4096 dimensions, L2-normalised: cosine = word overlap."""

    dim = 4096

    def __init__(self) -> None:
        self.num_texts = 0

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self.num_texts += len(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"[a-z]+", text.lower()):
                if word not in STOP_WORDS:
                    out[row, _stable_hash(word) % self.dim] += 1.0
            norm = float(np.linalg.norm(out[row]))
            if norm:
                out[row] /= norm
        return out


STOP_WORDS = frozenset({"the", "a", "of", "to", "my", "with", "for", "now", "please", "i"})


def then_done(table: Mapping[str, float]) -> Logits:
    """`table`, except that right after a leaf's result or a child's output the model answers
    DONE (so a run ends once its call is made)."""
    def logits(prompt: Prompt, options: tuple[str, ...]) -> Mapping[str, float]:
        last = prompt.messages[-1].content
        if "DONE" in options and (" returned: " in last or " finished: " in last):
            return {"DONE": 50.0}
        return table
    return logits


def evidence_source(tree: CapabilityTree, embedder: WordEmbedder | None = None,
                    ) -> EvidenceSource:
    embedder = embedder or WordEmbedder()
    return EvidenceSource(LeafIndex.from_tree(tree, embedder, model_id="words"), embedder)


def run(tree: CapabilityTree, engine: FakeEngine, task: str, **recovery: Any) -> RunState:
    """One run of `task` with the recovery options given (keyword arguments)."""
    options = RouterOptions(recovery=RecoveryOptions(**recovery), speculation=DraftSource.OFF)
    machine = build_machine(tree, engine, options=options, evidence=evidence_source(tree))
    return run_query(machine, Query(id="t", query=task, gold=(), args=None, tags=()))


def _num_tokens(prompt: PromptInput) -> int:
    text = prompt if isinstance(prompt, str) else " ".join(m.content for m in prompt.messages)
    return len(text.split())


def _stable_hash(word: str) -> int:
    return int.from_bytes(hashlib.sha256(word.encode()).digest()[:8], "big")
