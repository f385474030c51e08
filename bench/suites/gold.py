"""Teacher-forced runs: the stack machine walks the gold route while the model is asked, at
every routing call, what it would answer.

Why forced: the paper's cost figures (input tokens, calls, schema tokens per call) are those
of a correct route, and a small model that stops early would otherwise report the cost of
a route nobody wanted. Forcing gives every variant the identical route, so tokens, prefill
and latency compare like with like; and since decoding is greedy, a run whose every answer
equals the gold answer *is* the run the model makes on its own. So:

- `success`: every routing answer along the gold route equals the gold answer (children and
  completion states alike). This is first-try success: a free run that strays into a wrong
  branch and recovers with BACK counts as a failure here.
- the model's own arguments are used whenever they are valid, so the prompts match a free
  run's; invalid ones are replaced by the gold arguments (coerced to the schema's types) so
  the route can continue, and counted as format failures.

Each model call becomes a `CallRecord`; `bench/suites/aggregate.py` turns them into item metrics.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from stackroute.bench.suites.policies import Answer, RoutingPolicy
from stackroute.runtime.decision import Decision
from stackroute.runtime.menu import CompletionState, Menu
from stackroute.runtime.prompt import Prompt, PromptLayout
from stackroute.runtime.router import RoutingRequest
from stackroute.runtime.schemas import argument_errors
from stackroute.runtime.tree import Node
from stackroute.runtime.usage import Usage
from stackroute.server.engines.base import ContextOverflowError, Engine
from stackroute.server.tools.evaluate import arguments_equal

CHOOSE = "choose"
ARGUMENTS = "arguments"
COMPLETION_STATES = frozenset(s.value for s in CompletionState)


class OverBudgetError(Exception):
    """A prompt that fits the context but exceeds the run's `--max-prompt-tokens` budget
    (a smoke run skips such items instead of spending minutes on them)."""


class GoldRouteError(RuntimeError):
    """The gold route cannot be followed in this catalog: the harness's bug or bad data."""


@dataclass(kw_only=True)
class CallRecord:
    """One model call of a forced run. `gold` is the gold answer (an option name, or for an
    arguments call the leaf's path); `answer` the model's parsed answer (None: unreadable)."""

    kind: str  # CHOOSE | ARGUMENTS
    node: str  # path of the router the call was made at ("" is the root)
    leaf_index: int  # gold leaves already called when this call was made
    gold: str
    gold_is_leaf: bool = False
    prompt_tokens: int = 0
    prompt_chars: int = 0
    schema_tokens: int = 0  # option lines of the menu shown (CHOOSE only)
    answer: str | None = None
    is_correct: bool = False  # the answer equals gold (ARGUMENTS: equals the gold arguments)
    problem: str | None = None  # why the answer is a format-validation failure
    is_lenient_valid: bool = True
    is_args_scored: bool = False  # ARGUMENTS: gold arguments were given
    context_exceeded: bool = False
    usage: dict[str, Any] = field(default_factory=dict)
    raw_text: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CallRecord:
        return cls(**data)


class TokenCounter:
    """Prompt and schema token counts with the engine's own tokenizer and chat format.

    Menu option lines are counted once per (layout, node): the same menu is shown at every
    visit, and the flat menu of 512 leaves is 116k tokens of text to encode."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.counting_ms = 0.0  # time spent counting, which a timed run subtracts
        self._schema: dict[tuple[int, str], int] = {}

    def prompt_tokens(self, prompt: Prompt) -> int:
        started = time.perf_counter()
        count = self.engine.count_tokens(prompt)
        self.counting_ms += (time.perf_counter() - started) * 1e3
        return count

    def schema_tokens(self, layout: PromptLayout, node: Node) -> int:
        key = (id(layout), node.path_str)
        if key not in self._schema:
            started = time.perf_counter()
            self._schema[key] = self.engine.count_tokens(option_lines(layout, node))
            self.counting_ms += (time.perf_counter() - started) * 1e3
        return self._schema[key]


def option_lines(layout: PromptLayout, node: Node) -> str:
    """The lines of `node`'s menu turn that present its children (names, descriptions and,
    in the flat baseline, full schemas): the visible capability text of one call."""
    lines = layout.menu_turn(node).content.split("\n")
    states = tuple(f"- {s.value}:" for s in CompletionState)
    return "\n".join(line for line in lines if line.startswith("- ")
                     and not line.startswith(states))


def expected_choice(node: Node, menu: Menu, next_gold: str | None) -> str:
    """The gold answer at `node`: the child on the way to `next_gold` (a leaf's tree path;
    flat children carry theirs in `tree_path` metadata), else the completion state offered.

    >>> leaf = Node("pay", ("bills", "pay"), "Pay.")
    >>> bills = Node("bills", ("bills",), "Bills.", children=(leaf,))
    >>> root = Node("root", (), "", children=(bills,))
    >>> expected_choice(root, Menu("", ("bills",), (CompletionState.DONE,)), "bills/pay")
    'bills'
    >>> expected_choice(root, Menu("", ("bills",), (CompletionState.DONE,)), None)
    'DONE'
    """
    if next_gold is not None:
        for child in node.children:
            tree_path = child.metadata.get("tree_path", child.path_str)
            if child.is_leaf and tree_path == next_gold:
                return child.name
            if not child.is_leaf and next_gold.startswith(f"{tree_path}/"):
                return child.name
    state = CompletionState.DONE if CompletionState.DONE in menu.states else CompletionState.BACK
    return state.value


class GoldRouter:
    """A `Router` that always answers gold and records what the model answered instead.

    One instance per run: it counts the gold leaves already called."""

    def __init__(self, policy: RoutingPolicy, counter: TokenCounter, *, gold: Sequence[str],
                 gold_args: Sequence[Mapping[str, Any]] | None, max_context_tokens: int,
                 max_prompt_tokens: int | None = None) -> None:
        self.policy = policy
        self.counter = counter
        self.gold = tuple(gold)
        self.gold_args = tuple(gold_args) if gold_args is not None else None
        self.max_context_tokens = max_context_tokens
        self.max_prompt_tokens = max_prompt_tokens
        self.calls: list[CallRecord] = []
        self.num_leaves_called = 0

    def route(self, request: RoutingRequest) -> Decision:
        next_gold = (self.gold[self.num_leaves_called]
                     if self.num_leaves_called < len(self.gold) else None)
        gold = expected_choice(request.node, request.menu, next_gold)
        if gold not in request.menu:
            raise GoldRouteError(f"gold answer {gold!r} is not offered at "
                                 f"{request.node.path_str or '<root>'}: {request.menu.options}")
        child = request.node.child(gold)
        is_leaf = child is not None and child.is_leaf
        record = CallRecord(kind=CHOOSE, node=request.node.path_str,
                            leaf_index=self.num_leaves_called, gold=gold, gold_is_leaf=is_leaf,
                            prompt_tokens=self.counter.prompt_tokens(request.prompt),
                            prompt_chars=request.prompt.num_chars,
                            schema_tokens=self.counter.schema_tokens(request.layout,
                                                                     request.node))
        answer = self._ask(record, lambda: self.policy.choose(request))
        record.is_correct = answer.is_valid and answer.value == gold
        usage = answer.usage
        if child is None or not child.is_leaf:
            return Decision(choice=gold, usage=usage, detail={"model_answer": answer.value})
        arguments, text, args_usage = self._arguments(request, child)
        self.num_leaves_called += 1
        return Decision(choice=gold, arguments=arguments, usage=usage + args_usage,
                        detail={"model_answer": answer.value, "arguments_text": text})

    def _arguments(self, request: RoutingRequest, leaf: Node,
                   ) -> tuple[dict[str, Any], str, Usage]:
        index = self.num_leaves_called
        gold_args = self.gold_args[index] if self.gold_args is not None and index < len(
            self.gold_args) else None
        prompt = request.arguments_prompt(leaf)
        record = CallRecord(kind=ARGUMENTS, node=request.node.path_str, leaf_index=index,
                            gold=leaf.metadata.get("tree_path", leaf.path_str),
                            gold_is_leaf=True, prompt_tokens=self.counter.prompt_tokens(prompt),
                            prompt_chars=prompt.num_chars, is_args_scored=gold_args is not None)
        answer = self._ask(record, lambda: self.policy.arguments(request, leaf))
        if answer.is_valid:
            record.is_correct = gold_args is None or arguments_equal(
                answer.value, gold_args, leaf.parameters)
            return dict(answer.value), answer.raw_text, answer.usage
        substitute = coerce_to_schema(gold_args or {}, leaf.parameters)
        if argument_errors(leaf.parameters, substitute):
            raise GoldRouteError(f"the model's arguments for {leaf.path_str} are invalid and "
                                 f"so are the gold ones: {gold_args}")
        return substitute, json.dumps(substitute, ensure_ascii=False), answer.usage

    def _ask(self, record: CallRecord, ask: Callable[[], Answer]) -> Answer:
        """Record the call (before asking, so an overflow still shows the prompt's size)."""
        self.calls.append(record)
        if (self.max_prompt_tokens is not None
                and self.max_context_tokens >= record.prompt_tokens > self.max_prompt_tokens):
            raise OverBudgetError(f"prompt of {record.prompt_tokens} tokens is over the "
                                  f"budget of {self.max_prompt_tokens}")
        try:
            answer = ask()
        except ContextOverflowError:
            record.context_exceeded = True
            raise
        record.answer = None if answer.value is None else (
            answer.value if isinstance(answer.value, str) else json.dumps(answer.value))
        record.problem = answer.problem
        record.is_lenient_valid = answer.is_lenient_valid
        record.usage = answer.usage.to_dict()
        record.raw_text = answer.raw_text[:500]
        return answer


def coerce_to_schema(arguments: Mapping[str, Any], schema: Mapping[str, Any] | None,
                     ) -> dict[str, Any]:
    """Gold arguments with numeric strings turned into the schema's number types (Seal-Tools
    writes `"age": "63"` for an integer).

    >>> coerce_to_schema({"age": "63", "name": "Ann"}, {"properties": {"age": {"type": "integer"}}})
    {'age': 63, 'name': 'Ann'}
    """
    props: Mapping[str, Any] = (schema or {}).get("properties", {})
    out: dict[str, Any] = {}
    for key, value in arguments.items():
        kind = props.get(key, {}).get("type")
        if isinstance(value, str) and kind in ("integer", "number"):
            try:
                number = float(value)
                value = int(number) if kind == "integer" and number.is_integer() else number
            except ValueError:
                pass
        out[key] = value
    return out
