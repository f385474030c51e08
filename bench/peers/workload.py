"""What `stackroute bench peers` runs: real requests' model calls, the same for every system.

A *request* is one single-tool query of a generated suite (the cache suite's catalog:
scale-up at 16 tools) walked by the real `StackMachine` along its gold route, teacher-forced so
every system sees exactly the same prompts: the routing calls that descend, the leaf's
argument generation (its prompt extends the last routing prompt: append-only), then the
`DONE` calls that unwind the stack after the leaf ran (the leaf returns its gold arguments).
An *argument case* is one Seal-Tools dev single-tool query's argument generation under its
gold leaf's schema, prompted as `bench/experiments/jump_forward.py` prompts it.

Every call carries the token ids our renderer makes (`server/engines/rendering.py`), so a
peer given the same ids, or the text those ids decode to, reads the same prompt.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from stackroute.bench.workloads.datasets import SEAL_DIR, seal_queries
from stackroute.bench.workloads.generate import generate_suite
from stackroute.runtime.catalog import build_tree, load_catalog
from stackroute.runtime.decision import Decision
from stackroute.runtime.governance import RunStatus
from stackroute.runtime.machine import StackMachine
from stackroute.runtime.messages import Message
from stackroute.runtime.prompt import Prompt, PromptLayout
from stackroute.runtime.router import RoutingRequest
from stackroute.runtime.tree import CapabilityTree

REQUEST_SUITE = "scale-up"  # the cache suite's catalogs (bench/suites/scenarios.py)
ARGUMENTS_SYSTEM = "You fill in tool arguments as JSON."  # jump_forward_bench.py's prompt
MAX_ARGUMENT_TOKENS = 384  # the router's argument budget
MAX_DECISION_TOKENS = 48  # a token-by-token peer's budget for one option name


class CallKind(Enum):
    DECISION = "decision"
    ARGUMENTS = "arguments"


@dataclass(frozen=True)
class ModelCall:
    """One model call of the workload: a menu decision (`options`) or an argument generation
    (`schema`), with its prompt as our engine renders it."""

    kind: CallKind
    prompt: Prompt
    prompt_ids: tuple[int, ...]
    options: tuple[str, ...] = ()
    schema: Mapping[str, Any] | None = None
    max_tokens: int = MAX_DECISION_TOKENS  # a token-by-token system's budget for the answer
    gold: str | None = None  # a decision's teacher-forced answer; a request's arguments' JSON


@dataclass(frozen=True)
class WorkItem:
    """A request (routing calls and its argument generation, in order) or one argument case."""

    item_id: str
    source: str  # "scale-up-16" (a request) or "seal-tools-dev" (an argument case)
    calls: tuple[ModelCall, ...] = field(default_factory=tuple)

    @property
    def is_request(self) -> bool:
        return any(c.kind is CallKind.DECISION for c in self.calls)


def render_call(render: Any, kind: CallKind, prompt: Prompt, **rest: Any) -> ModelCall:
    """`render` is a `ChatRenderer`: the ids every system gets."""
    return ModelCall(kind=kind, prompt=prompt, prompt_ids=tuple(render.prompt_ids(prompt)),
                     **rest)


def request_items(render: Any, *, num_leaves: int, num_requests: int, seed: int = 0,
                  max_argument_tokens: int = MAX_ARGUMENT_TOKENS) -> list[WorkItem]:
    """The first `num_requests` single-tool queries of the scale-up suite at `num_leaves`."""
    generated = generate_suite(REQUEST_SUITE, num_leaves=num_leaves, seed=seed)
    tree = build_tree(generated.catalog)
    queries = [q for q in generated.queries if len(q["gold"]) == 1][:num_requests]
    return [WorkItem(item_id=q["id"], source=f"{REQUEST_SUITE}-{num_leaves}",
                     calls=tuple(route_calls(render, tree, q["query"], q["gold"][0],
                                             q["args"][0],
                                             max_argument_tokens=max_argument_tokens)))
            for q in queries]


def route_calls(render: Any, tree: CapabilityTree, query: str, gold: str,
                gold_arguments: Mapping[str, Any], *,
                max_argument_tokens: int = MAX_ARGUMENT_TOKENS) -> list[ModelCall]:
    """The model calls of the teacher-forced run of `query` to `gold`: descend, arguments,
    unwind with DONE (a sensitive leaf's
    gate is approved). No model involved."""
    path = gold.split("/")
    calls: list[ModelCall] = []

    class GoldRouter:
        def route(self, request: RoutingRequest) -> Decision:
            is_unwinding = bool(request.calls)
            choice = "DONE" if is_unwinding else path[request.depth]
            calls.append(render_call(render, CallKind.DECISION, request.prompt,
                                     options=request.menu.options, gold=choice))
            child = None if is_unwinding else request.child(choice)
            if child is None or not child.is_leaf:
                return Decision(choice=choice, arguments=None)
            calls.append(render_call(render, CallKind.ARGUMENTS,
                                     request.arguments_prompt(child),
                                     schema=child.parameters or {"type": "object",
                                                                 "properties": {}},
                                     max_tokens=max_argument_tokens,
                                     gold=json.dumps(dict(gold_arguments), ensure_ascii=False)))
            return Decision(choice=choice, arguments=dict(gold_arguments))

    machine = StackMachine(tree, GoldRouter())
    state = machine.start(query)
    for _ in range(4 * len(path) + 4):
        if state.status is RunStatus.PAUSED and state.pending is not None:
            machine.approve(state, state.pending.digest)  # a sensitive leaf: the user says yes
        if state.status is not RunStatus.RUNNING:
            break
        machine.step(state)
    if state.status is not RunStatus.DONE:
        raise RuntimeError(f"the gold run of {query!r} ended {state.status.value}, not done")
    return calls


def argument_items(render: Any, *, num_queries: int, offset: int = 0,
                   max_argument_tokens: int = MAX_ARGUMENT_TOKENS) -> list[WorkItem]:
    """Seal-Tools dev single-tool queries' argument generations under the gold leaf's schema
    (the prompt of `bench/experiments/jump_forward.py`)."""
    tree = load_catalog(SEAL_DIR / "seal-tools.catalog.json")
    layout = PromptLayout(tree)
    items = []
    for query in seal_queries(SEAL_DIR / "dev.queries.jsonl", single=num_queries, multi=0,
                              offset=offset):
        leaf = tree.node(query.gold[0])
        prompt = Prompt((Message("system", ARGUMENTS_SYSTEM),
                         layout.arguments_request(leaf, query.query)))
        schema = leaf.parameters or {"type": "object", "properties": {}}
        items.append(WorkItem(item_id=query.id, source="seal-tools-dev", calls=(
            render_call(render, CallKind.ARGUMENTS, prompt, schema=schema,
                        max_tokens=max_argument_tokens),)))
    return items


def interleave(*groups: Sequence[WorkItem]) -> list[WorkItem]:
    """Items of several groups taken in turn (a, b, a, b, …), so a drift in the machine's
    load spreads over every group."""
    out: list[WorkItem] = []
    for k in range(max((len(g) for g in groups), default=0)):
        out.extend(g[k] for g in groups if k < len(g))
    return out
