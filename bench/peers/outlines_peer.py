"""outlines in `stackroute bench peers`: its own `Literal[...]` choice generation for a menu and
its JSON-schema generation for arguments, on the same transformers model object as ours.

outlines drives `model.generate` with its logits processor: every call prefills the whole
prompt (it keeps no KV between calls) and runs one pass per generated token. It is given the
prompt's messages as an outlines `Chat` (the model's ChatML template renders them as ours
does); `num_prompt_mismatches` counts calls whose first forward pass (seen by a
`PassCounter`) did not get exactly our renderer's ids. The schema
is the one our engine compiles (free strings capped the same way) and JSON is compact (no
whitespace between tokens), as ours; the decode is greedy (`do_sample=False`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from stackroute.bench.peers.system import CallOutcome, PassCounter
from stackroute.bench.peers.workload import (
    CallKind,
    ModelCall,
)
from stackroute.grammars.bounded import bounded_schema
from stackroute.grammars.string_caps import DEFAULT_MAX_STRING_CHARS


class OutlinesSystem:
    name = "outlines"

    def __init__(self, loaded: Any, counter: PassCounter, *,
                 max_string_chars: int | None = DEFAULT_MAX_STRING_CHARS) -> None:
        import outlines
        from outlines.inputs import Chat

        self._outlines, self._chat = outlines, Chat
        self.model = outlines.from_transformers(loaded.model, loaded.tokenizer)
        self.tokenizer = loaded.tokenizer
        self.counter = counter
        self.max_string_chars = max_string_chars
        self.generators: dict[str, Any] = {}
        self.num_prompt_mismatches = 0

    def generator(self, call: ModelCall) -> Any:
        outlines = self._outlines
        if call.kind is CallKind.DECISION:
            key = "menu:" + json.dumps(call.options)
            if key not in self.generators:
                self.generators[key] = outlines.Generator(
                    self.model, Literal[tuple(call.options)])  # type: ignore[valid-type]
            return self.generators[key]
        schema = bounded_schema(call.schema or {}, self.max_string_chars)  # as ours does
        key = "json:" + json.dumps(schema, sort_keys=True)
        if key not in self.generators:
            from outlines.types import JsonSchema

            self.generators[key] = outlines.Generator(
                self.model, JsonSchema(json.dumps(schema, ensure_ascii=False),
                                       whitespace_pattern=""))
        return self.generators[key]

    def prepare(self, calls: Sequence[ModelCall]) -> None:
        for call in calls:
            self.generator(call)

    def clear_cache(self) -> None:
        """outlines keeps no KV between calls."""

    def run(self, call: ModelCall) -> CallOutcome:
        generator = self.generator(call)
        # A Chat, not text: outlines wraps a plain string in the chat template once more.
        chat = self._chat([{"role": m.role, "content": m.content} for m in call.prompt.messages])
        max_new = call.max_tokens
        with self.counter.counting() as counted:
            text = generator(chat, max_new_tokens=max_new, do_sample=False)
        if counted.first_input_ids != list(call.prompt_ids):
            self.num_prompt_mismatches += 1
        num_generated = len(self.tokenizer.encode(str(text), add_special_tokens=False))
        # one pass per token sampled; a run that did not end on a stop token hit the cap
        finish = "length" if counted.num_passes >= max_new else "stop"
        return CallOutcome(text=str(text), forward_passes=counted.num_passes,
                           prefill_tokens=len(counted.first_input_ids or ()),
                           generated_tokens=num_generated, finish_reason=finish)
