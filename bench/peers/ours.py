"""Our engine in `stackroute bench peers`: the embedded transformers engine built through
`create_engine`, `choose` for a menu (one tree-attention pass over the option trie) and
schema-constrained `generate` for arguments (jump-forward, prompt-lookup drafts), with its
prefix cache. Costs are the engine's own `Usage`."""

from __future__ import annotations

import time
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


class OursPathSystem(OursSystem):
    """`ours-path`: the same engine given a request's calls as the product's router gives them
    when it routes a drafted path (`runtime/speculation.py`): the descent's routing calls
    verified in one pass (`verify_path`, each level's prompt extending the one above by its
    gold answer, exactly the teacher-forced prompts), the argument generation, then the
    `DONE` calls that unwind in one pass (`verify_levels`). Every call's answer is the one the
    model gives under that call's own prompt, as step by step; only the passes are fewer. The
    product drafts from its leaf evidence; here the draft is the gold route (the workload's
    teacher forcing), so this is the product's cost where its draft is right. A group's wall
    time is charged to its first call (the others read 0 ms)."""

    name = "ours-path"

    def run_request(self, calls: Sequence[ModelCall]) -> list[tuple[CallOutcome, float]]:
        from stackroute.server.engines.verification import MenuLevel, PathLevel

        out: list[tuple[CallOutcome, float]] = []
        for group in call_groups(calls):
            started = time.perf_counter()
            if group[0].kind is CallKind.ARGUMENTS:
                outcomes = [self.run(group[0])]
            elif not out:  # the descent: one nested path
                outcomes = [_menu_outcome(r) for r in self.engine.verify_path(
                    [PathLevel(prompt=c.prompt, options=c.options, draft=c.gold or "")
                     for c in group])]
            else:  # the unwind: prompts that share only a prefix
                outcomes = [_menu_outcome(r) for r in self.engine.verify_levels(
                    [MenuLevel(prompt=c.prompt, options=c.options) for c in group])]
            latency_ms = (time.perf_counter() - started) * 1e3
            out += [(o, latency_ms if k == 0 else 0.0) for k, o in enumerate(outcomes)]
        return out


def call_groups(calls: Sequence[ModelCall]) -> list[list[ModelCall]]:
    """Runs of consecutive calls of one kind, each argument call alone.

    >>> d, a = ModelCall(CallKind.DECISION, None, ()), ModelCall(CallKind.ARGUMENTS, None, ())
    >>> [len(g) for g in call_groups([d, d, a, d])]
    [2, 1, 1]
    """
    groups: list[list[ModelCall]] = []
    for call in calls:
        if (groups and call.kind is CallKind.DECISION
                and groups[-1][0].kind is CallKind.DECISION):
            groups[-1].append(call)
        else:
            groups.append([call])
    return groups


def _menu_outcome(result: Any) -> CallOutcome:
    usage = result.usage
    return CallOutcome(text=result.choice, forward_passes=usage.forward_passes,
                       prefill_tokens=usage.prefill_tokens,
                       generated_tokens=usage.generated_tokens, finish_reason="stop")
