"""Engine test doubles that satisfy the `Engine` protocol without inheriting, and that the app
can build by import path (`ServerSettings(engine="engine_doubles:build_recording_engine")`).

`RecordingEngine` counts `close()` calls; every one built by import path is appended to
`BUILT`, so a test can find the engine the app made (even when the app failed to start).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

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

BUILT: list[RecordingEngine] = []


class RecordingEngine:
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

    def prepare(self, tree: CapabilityTree) -> PrepareStats:
        return PrepareStats(num_menus=0, num_schemas=0, compile_ms=0.0)

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

    def metrics(self) -> dict[str, float]:
        return {}

    def close(self) -> None:
        self.num_closes += 1
        if self.close_error is not None:
            raise self.close_error


def build_recording_engine(**options: Any) -> RecordingEngine:
    """The factory the app calls for `engine="engine_doubles:build_recording_engine"` (with
    `model`, and `base_url` when set): a RecordingEngine, appended to BUILT."""
    engine = RecordingEngine(**options)
    BUILT.append(engine)
    return engine
