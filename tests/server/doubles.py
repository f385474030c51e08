"""The test doubles of the server tests, in one module: engines that satisfy the `Engine`
protocol without inheriting (no model), and one bag-of-words embedder.

- `PlanEngine` follows a plan of option names (sessions, the routing API, the HTTP tests).
- `LogitEngine` answers menus greedily from scripted option logits (recovery, evidence,
  arguments, calibration).
- `HashEngine` chooses by a pure function of the prompt and verifies whole paths in one call
  (speculation, unwinding).
- `RequestScriptEngine` answers `script(request, options)` and pops scripted texts (the
  taxonomy tools).
- `RecordingEngine` gives canned answers and counts `close()`; the app can build it by import
  path (`ServerSettings(engine="doubles:build_recording_engine")`), appended to `BUILT`.
- `WordEmbedder`: a text's vector is the normalised sum of one fixed vector per word.

Benchmarks' scripted engine (also served by `--engine`) is `stackroute.bench.fixtures`'.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from stackroute.runtime.menu import CompletionState
from stackroute.runtime.prompt import Prompt
from stackroute.runtime.tree import CapabilityTree
from stackroute.runtime.usage import Usage
from stackroute.server.engines.base import (
    Constraint,
    DeltaSink,
    EngineInfo,
    Generation,
    MenuResult,
    PrepareStats,
    PromptInput,
    SamplingOptions,
    TextDelta,
)
from stackroute.server.engines.verification import PathLevel
from stackroute.server.routing.contrast import NEUTRAL_REQUEST

SEND_PLAN = ("payments", "send_money")
SEND_ARGUMENTS = {"send_money": {"payee": "Asha", "amount": 5}}


def num_words(prompt: PromptInput) -> int:
    """A prompt's length in words: the doubles' token count."""
    text = prompt if isinstance(prompt, str) else " ".join(m.content for m in prompt.messages)
    return len(text.split())


# -- engines --------------------------------------------------------------------------------
class _Unprepared:
    """What a double without menus to compile or metrics to report answers."""

    def prepare(self, tree: CapabilityTree) -> PrepareStats:
        return PrepareStats(num_menus=0, num_schemas=0, compile_ms=0.0)

    def metrics(self) -> dict[str, float]:
        return {}


class PlanEngine:
    """An engine that follows a plan instead of a model (it satisfies the Engine protocol
    without inheriting).

    At each menu it picks the first planned option on offer that the prompt has not answered
    yet, else DONE (or BACK). The choice is a pure function of the prompt, so a resumed run
    continues exactly as an uninterrupted one would. Leaf arguments come from `arguments` by
    leaf name. `gate`, when set, is waited on before every choice (to hold a run mid-step).
    """

    def __init__(self, plan: Sequence[str] = SEND_PLAN,
                 arguments: Mapping[str, Mapping[str, Any]] | None = None, *,
                 gate: threading.Event | None = None, fail_at: str | None = None) -> None:
        self.info = EngineInfo(engine="plan", model="plan", max_context_tokens=1 << 20)
        self.plan = tuple(plan)
        self.arguments = dict(SEND_ARGUMENTS if arguments is None else arguments)
        self.gate = gate
        self.fail_at = fail_at  # raise when this option would be chosen
        self.prepared: list[str] = []
        self.num_choices = 0

    def count_tokens(self, prompt: PromptInput) -> int:
        return num_words(prompt)

    def prepare(self, tree: CapabilityTree) -> PrepareStats:
        self.prepared.append(tree.name)
        return PrepareStats(num_menus=sum(1 for _ in tree.routers()),
                            num_schemas=sum(1 for _ in tree.leaves()), compile_ms=0.0)

    def choose(self, prompt: Prompt, options: Sequence[str], *,
               option_bias: Mapping[str, float] | None = None) -> MenuResult:
        if self.gate is not None:
            self.gate.wait(timeout=30)
        self.num_choices += 1
        if "copied from the request" in prompt.messages[-1].content:
            # A value menu (routing/arguments): answer outside it, so the router asks
            # `generate` for the arguments, which come from `arguments` as planned.
            return MenuResult(choice="", probabilities={}, margin=0.0,
                              usage=Usage(model_calls=1))
        answered = {m.content for m in prompt.messages if m.role == "assistant"}
        choice = next((o for o in self.plan if o in options and o not in answered), None)
        if choice is None:
            done = CompletionState.DONE.value
            choice = done if done in options else CompletionState.BACK.value
        if choice == self.fail_at:
            raise RuntimeError(f"engine failure at {choice}")
        rest = (1.0 - 0.9) / max(len(options) - 1, 1)
        probabilities = {o: 0.9 if o == choice else rest for o in options}
        return MenuResult(choice=choice, probabilities=probabilities, margin=2.0,
                          usage=Usage(model_calls=1, prompt_tokens=self.count_tokens(prompt),
                                      prefill_tokens=3, cached_tokens=7, generated_tokens=1,
                                      forward_passes=1, latency_ms=1.5))

    def generate(self, prompt: PromptInput, *, constraint: Constraint | None = None,
                 sampling: SamplingOptions | None = None) -> Generation:
        if not isinstance(prompt, Prompt):
            raise TypeError("PlanEngine generates arguments for chat prompts only")
        # The answer naming the leaf: the last assistant turn that names a planned leaf (the
        # arguments ask and any value answers come after it).
        leaf = next((m.content for m in reversed(prompt.messages)
                     if m.role == "assistant" and m.content in self.arguments), "")
        text = json.dumps(self.arguments.get(leaf, {}))
        return Generation(text=text, finish_reason="stop",
                          usage=Usage(model_calls=1, generated_tokens=len(text.split())))

    def metrics(self) -> dict[str, float]:
        return {"choices": float(self.num_choices)}


Logits = Mapping[str, float] | Callable[[Prompt, tuple[str, ...]], Mapping[str, float]]


@dataclass
class ChooseCall:
    prompt: Prompt
    options: tuple[str, ...]
    bias: dict[str, float] | None

    @property
    def is_neutral(self) -> bool:
        return any(f"Request: {NEUTRAL_REQUEST}\n" in m.content for m in self.prompt.messages)


class LogitEngine(_Unprepared):
    """Option logits from a table (missing options: 0) or a function of the prompt; the
    neutral prompt reads `neutral` instead. Greedy over `logit + bias`, ties to the first."""

    def __init__(self, logits: Logits, *, neutral: Mapping[str, float] | None = None) -> None:
        self.logits = logits
        self.neutral = neutral or {}
        self.info = EngineInfo(engine="fake", model="fake-model", max_context_tokens=100_000)
        self.calls: list[ChooseCall] = []

    def count_tokens(self, prompt: PromptInput) -> int:
        return num_words(prompt)

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
                          usage=Usage(model_calls=1, prompt_tokens=num_words(prompt),
                                      prefill_tokens=num_words(prompt)))

    def generate(self, prompt: PromptInput, *, constraint: Constraint | None = None,
                 sampling: SamplingOptions | None = None) -> Generation:
        return Generation(text="{}", finish_reason="stop", usage=Usage(model_calls=1))


    def routing_calls(self) -> list[ChooseCall]:
        return [c for c in self.calls if not c.is_neutral]


def then_done(table: Mapping[str, float]) -> Logits:
    """`table`, except that right after a leaf's result or a child's output the model answers
    DONE (so a run ends once its call is made)."""
    def logits(prompt: Prompt, options: tuple[str, ...]) -> Mapping[str, float]:
        last = prompt.messages[-1].content
        if "DONE" in options and (" returned: " in last or " finished: " in last):
            return {"DONE": 50.0}
        return table
    return logits


def _hash(*parts: Any) -> int:
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:8], "big")


class HashEngine:
    """Greedy-like: the choice is a pure function of (prompt, options). `prefer` maps a node's
    menu (by its options) to the option to choose; otherwise a hash picks. `tight` options get
    a margin below any sensible threshold in `verify_path` only (a near tie that one long pass
    might round differently)."""

    def __init__(self, prefer: dict[str, str] | None = None,
                 tight: set[str] | None = None) -> None:
        self.prefer = prefer or {}
        self.tight = tight or set()
        self.choose_calls = 0
        self.verify_calls = 0

    def _pick(self, prompt: PromptInput, options: Sequence[str]) -> str:
        assert isinstance(prompt, Prompt)
        last = prompt.messages[-1].content
        if "DONE" in options and ("returned" in last or "finished" in last):
            return "DONE"
        for option in options:
            if option in self.prefer:
                return self.prefer[option]
        return options[_hash(prompt.messages, tuple(options)) % len(options)]

    def _result(self, prompt: PromptInput, options: Sequence[str], margin: float,
                usage: Usage) -> MenuResult:
        choice = self._pick(prompt, options)
        rest = (1.0 - 0.6) / max(len(options) - 1, 1)
        return MenuResult(choice=choice,
                          probabilities={o: 0.6 if o == choice else rest for o in options},
                          margin=margin, usage=usage)

    def choose(self, prompt: PromptInput, options: Sequence[str], *,
               option_bias: Any = None) -> MenuResult:
        self.choose_calls += 1
        return self._result(prompt, options, 1.0, Usage(model_calls=1, forward_passes=1))

    def verify_path(self, levels: Sequence[PathLevel]) -> list[MenuResult]:
        self.verify_calls += 1
        return self._levels(levels)

    def _levels(self, levels: Sequence[PathLevel | Any]) -> list[MenuResult]:
        """Each level's choice as `choose` would make it; the pass's cost on the first."""
        out = []
        for k, level in enumerate(levels):
            choice = self._pick(level.prompt, level.options)
            margin = 1e-6 if choice in self.tight else 1.0
            usage = Usage(model_calls=1, forward_passes=1) if k == 0 else Usage()
            out.append(self._result(level.prompt, level.options, margin, usage))
        return out

    def generate(self, prompt: PromptInput, **_: Any) -> Generation:
        return Generation(text="{}", finish_reason="stop", usage=Usage(model_calls=1))


def request_of(prompt: Prompt | str) -> str:
    text = prompt if isinstance(prompt, str) else "\n".join(m.content for m in prompt.messages)
    match = re.search(r"Request: (.*)", text)
    return match.group(1).strip() if match else ""


class RequestScriptEngine(_Unprepared):
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



BUILT: list[RecordingEngine] = []


class RecordingEngine(_Unprepared):
    """Canned answers; `error` makes every generation raise it; `close_error` makes `close()`
    raise it (after counting the call)."""

    info = EngineInfo(engine="recording", model="recording-model", max_context_tokens=512)

    def __init__(self, *, error: Exception | None = None,
                 close_error: Exception | None = None, **options: Any) -> None:
        self.error = error
        self.close_error = close_error
        self.options = options
        self.num_closes = 0

    def count_tokens(self, prompt: PromptInput) -> int:
        return 4

    def choose(self, prompt: Prompt, options: Sequence[str], *,
               option_bias: Mapping[str, float] | None = None) -> MenuResult:
        return MenuResult(choice=options[0], probabilities={options[0]: 1.0}, margin=1.0,
                          usage=Usage(model_calls=1))

    def generate(self, prompt: PromptInput, *, constraint: Constraint | None = None,
                 sampling: SamplingOptions | None = None) -> Generation:
        if self.error is not None:
            raise self.error
        return Generation(text="ok", finish_reason="stop",
                          usage=Usage(model_calls=1, prompt_tokens=4, generated_tokens=1))

    def generate_stream(self, prompt: PromptInput, *, on_delta: DeltaSink,
                        constraint: Constraint | None = None,
                        sampling: SamplingOptions | None = None) -> Generation:
        """`generate`, its answer sent as one delta."""
        gen = self.generate(prompt, constraint=constraint, sampling=sampling)
        on_delta(TextDelta(gen.text))
        return gen


    def close(self) -> None:
        self.num_closes += 1
        if self.close_error is not None:
            raise self.close_error


def build_recording_engine(**options: Any) -> RecordingEngine:
    """The factory the app calls for `engine="doubles:build_recording_engine"` (with
    `model`, and `base_url` when set): a RecordingEngine, appended to BUILT."""
    engine = RecordingEngine(**options)
    BUILT.append(engine)
    return engine


# -- the embedder ---------------------------------------------------------------------------
STOP_WORDS = frozenset({"the", "a", "of", "to", "my", "with", "for", "now", "please", "i"})


def _stable_hash(word: str) -> int:
    return int.from_bytes(hashlib.sha256(word.encode()).digest()[:8], "big")


def word_vector(word: str, dim: int) -> NDArray[np.float32]:
    """A fixed random unit vector per word (the same in every process)."""
    seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:8], "little")
    v = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


class WordEmbedder:
    """Bag of words, L2-normalised. `one-hot` (the default): each word (stop words left out)
    hashed into one of `dim` dimensions, so cosine = word overlap and a text without words
    is the zero vector. `random`: each lower-case word or number a fixed random vector (texts
    that share words are close, equal texts equal; an empty text gets a vector of its own)."""

    def __init__(self, dim: int = 4096, *,
                 vectors: Literal["one-hot", "random"] = "one-hot") -> None:
        self.dim = dim
        self.vectors = vectors
        self.num_calls = 0
        self.num_texts = 0

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self.num_calls += 1
        self.num_texts += len(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            if self.vectors == "one-hot":
                for word in re.findall(r"[a-z]+", text.lower()):
                    if word not in STOP_WORDS:
                        out[row, _stable_hash(word) % self.dim] += 1.0
            else:
                for word in re.findall(r"[a-z0-9]+", text.lower()):
                    out[row] += word_vector(word, self.dim)
            norm = float(np.linalg.norm(out[row]))
            if norm:
                out[row] /= norm
            elif self.vectors == "random":
                out[row] = word_vector("<empty>", self.dim)
        return out
