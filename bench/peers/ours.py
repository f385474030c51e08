"""Our engine in `stackroute bench peers`: the embedded transformers engine built through
`create_engine`, `choose` for a menu (one tree-attention pass over the option trie) and
schema-constrained `generate` for arguments (jump-forward, prompt-lookup drafts), with its
prefix cache. Costs are the engine's own `Usage`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stackroute.bench.peers.system import CallOutcome
from stackroute.bench.peers.workload import CallKind, ModelCall
from stackroute.server.engines.base import Constraint, SamplingOptions
from stackroute.server.engines.registry import create_engine


class OursSystem:
    name = "ours"

    def __init__(self, loaded: Any) -> None:
        self.engine: Any = create_engine("transformers", loaded=loaded)

    def prepare(self, calls: Sequence[ModelCall]) -> None:
        for call in calls:
            if call.kind is CallKind.DECISION:
                self.engine.compiled_menu(call.options)
            else:
                self.engine.compiled_grammar(Constraint.json(dict(call.schema or {})))

    def run(self, call: ModelCall) -> CallOutcome:
        if call.kind is CallKind.DECISION:
            result = self.engine.choose(call.prompt, call.options)
            text, usage, finish = result.choice, result.usage, "stop"
        else:
            gen = self.engine.generate(call.prompt, constraint=Constraint.json(
                dict(call.schema or {})), sampling=SamplingOptions(max_tokens=call.max_tokens))
            text, usage, finish = gen.text, gen.usage, gen.finish_reason
        return CallOutcome(text=text, forward_passes=usage.forward_passes,
                           prefill_tokens=usage.prefill_tokens,
                           generated_tokens=usage.generated_tokens, finish_reason=finish)

    def clear_cache(self) -> None:
        self.engine.cache.clear()
