"""The engine protocol every engine implements (transformers CPU, vLLM GPU, remote), the
values that cross it, and the errors engines raise. `registry.py` builds one by name. The
runtime never sees an engine: `server/routing/router.py` adapts an engine to the runtime's
`Router`.

Every engine error is an `EngineError` and carries the HTTP status the service answers it
with (`http_status`), so the HTTP layer maps any of them without knowing the engine:

>>> ContextOverflowError("prompt needs 9000 tokens").http_status
400
>>> issubclass(ContextOverflowError, InputError)  # the user's prompt is too long
True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from stackroute.runtime.errors import InputError, StackrouteError
from stackroute.runtime.prompt import Prompt
from stackroute.runtime.tree import CapabilityTree
from stackroute.runtime.usage import Usage

EMPTY_OBJECT_SCHEMA: Mapping[str, Any] = {"type": "object", "properties": {}}
"""The arguments schema of a leaf that declares none (and of a JSON constraint without a
schema): the empty object `{}`. Shared by every engine and the router; never mutate it."""


class EngineError(StackrouteError):
    """An engine could not answer. `http_status` is what the service answers with (a class
    attribute; an instance may narrow it, as an overloaded upstream's 503 does);
    `retry_after_s`, when set on a 503, is how long the client should wait (its
    `Retry-After`)."""

    code = "engine_error"
    http_status: int = 500
    retry_after_s: float | None = None


class ContextOverflowError(InputError, EngineError):
    """The prompt does not fit the model's context window (the user's input: a 4xx)."""

    code = "context_overflow"
    http_status = 400


class ConstraintKind(StrEnum):
    CHOICE = "choice"
    JSON = "json"
    REGEX = "regex"


@dataclass(frozen=True)
class Constraint:
    """What a completion must match: one of `choices`, a JSON `schema`, or a `pattern`."""

    kind: ConstraintKind
    choices: tuple[str, ...] = ()
    schema: Mapping[str, Any] | None = None
    pattern: str | None = None

    @classmethod
    def choice(cls, options: Sequence[str]) -> Constraint:
        return cls(ConstraintKind.CHOICE, choices=tuple(options))

    @classmethod
    def json(cls, schema: Mapping[str, Any]) -> Constraint:
        return cls(ConstraintKind.JSON, schema=schema)

    @classmethod
    def regex(cls, pattern: str) -> Constraint:
        return cls(ConstraintKind.REGEX, pattern=pattern)


@dataclass(frozen=True)
class EngineInfo:
    engine: str
    model: str
    max_context_tokens: int
    dtype: str = ""
    # What this engine chose at start, as (name, value) pairs for /readyz and logs: how
    # prompts render ("prompt_rendering": "template" | "chatml" | ...), which constraint API
    # a remote upstream offers ("constraints"), whether it sends logprobs ("logprobs").
    features: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, kw_only=True)
class MenuResult:
    """A constrained choice: the option, every option's probability, and what it cost."""

    choice: str
    probabilities: dict[str, float]
    margin: float  # log-prob gap at the closest branch point on the chosen path
    usage: Usage


@dataclass(frozen=True)
class TokenLogprob:
    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True, kw_only=True)
class Generation:
    text: str
    finish_reason: str  # "stop" | "length"
    usage: Usage
    logprobs: tuple[TokenLogprob, ...] | None = None
    # A JSON string value reached the engine's free-string cap (`max_string_chars`): the
    # answer is whole but that value may be cut short.
    is_string_capped: bool = False


@dataclass(frozen=True)
class PrepareStats:
    num_menus: int
    num_schemas: int
    compile_ms: float


@dataclass(frozen=True, kw_only=True)
class SamplingOptions:
    max_tokens: int = 256
    temperature: float = 0.0
    stop: tuple[str, ...] = ()
    top_logprobs: int | None = None  # None: no logprobs; 0: the chosen token's only
    seed: int | None = None
    top_p: float = 1.0  # nucleus sampling (temperature > 0): the smallest set of tokens
    # whose probabilities sum to top_p; 1.0: every token


PromptInput = Prompt | str  # chat messages (rendered with the chat format) or raw text


@dataclass(frozen=True)
class TextDelta:
    """A piece of a generation's answer, sent as soon as the engine has it. The deltas of one
    `generate_stream` call joined are exactly the returned `Generation.text`."""

    text: str


DeltaSink = Callable[[TextDelta], None]
"""Where `generate_stream` sends deltas, called on the engine's own thread (a worker thread,
or the vLLM engine's loop thread), so it must be thread-safe and quick. An exception it raises
(the client went away) stops the generation and comes out of `generate_stream`."""


class Engine(Protocol):
    info: EngineInfo

    def count_tokens(self, prompt: PromptInput) -> int:
        """Tokens the model would see for this prompt (with the chat format applied)."""
        ...

    def prepare(self, tree: CapabilityTree) -> PrepareStats:
        """Compile every node's menu and every leaf's schema now, not on first request."""
        ...

    def choose(self, prompt: Prompt, options: Sequence[str], *,
               option_bias: Mapping[str, float] | None = None) -> MenuResult:
        """Pick one option under the menu constraint; greedy, with all option probabilities."""
        ...

    def generate(self, prompt: PromptInput, *, constraint: Constraint | None = None,
                 sampling: SamplingOptions | None = None) -> Generation:
        """A completion, optionally constrained (choice, JSON schema, regex)."""
        ...

    def generate_stream(self, prompt: PromptInput, *, on_delta: DeltaSink,
                        constraint: Constraint | None = None,
                        sampling: SamplingOptions | None = None) -> Generation:
        """`generate`, sending the answer to `on_delta` piece by piece as it is produced (per
        decode step, jump-forward tokens included; the upstream's chunks for a remote server)
        under the same constraint; returns the whole `Generation`, whose text the deltas
        join to. Blocking, like every engine call: the HTTP layer runs it in a worker thread
        and carries the deltas to the event loop."""
        ...

    def metrics(self) -> dict[str, float]:
        """Counters for /metrics: cache hits, prefilled vs cached tokens, compile time."""
        ...


@runtime_checkable
class ClosableEngine(Protocol):
    """An engine that holds resources (a connection pool, an engine process) also has
    `close()`; whoever built the engine calls it once, when done (the app: at shutdown)."""

    def close(self) -> None:
        ...
