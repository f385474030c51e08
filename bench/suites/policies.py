"""How a model answers one routing call, as the benchmarks compare it: menu-constrained
(our engines' constrained choice, then schema-constrained arguments) or the paper's JSON
protocol (free generation of `{"choice": ...}` and of the arguments, parsed afterwards).

A policy only asks; it never decides what the run does next. `PolicyRouter` turns a policy
into a runtime `Router` (a free run); `bench/suites/gold.py` uses a policy under teacher forcing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol

from stackroute.runtime.decision import Decision
from stackroute.runtime.router import RoutingRequest
from stackroute.runtime.schemas import argument_errors
from stackroute.runtime.tree import Node
from stackroute.runtime.usage import Usage
from stackroute.server.engines.base import Constraint, Engine, SamplingOptions

EMPTY_OBJECT_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
MAX_ARGUMENT_TOKENS = 384  # as `server/routing/router.py` RouterOptions
MAX_CHOICE_TOKENS = 32  # a JSON choice object is about 10 tokens; room for a short preamble


@dataclass(frozen=True, kw_only=True)
class Answer:
    """What the model produced for one model call, parsed.

    `value` is the menu option (for a choice) or the argument object (for arguments), None
    when the text could not be read as one; `problem` says why (a format-validation failure).
    `is_lenient_valid` records whether a lenient reader (first JSON object anywhere in the
    text) would have accepted it.
    """

    value: Any
    raw_text: str
    usage: Usage
    problem: str | None = None
    is_lenient_valid: bool = True
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def is_valid(self) -> bool:
        return self.problem is None


class RoutingPolicy(Protocol):
    name: str

    def choose(self, request: RoutingRequest) -> Answer:
        """The model's own answer to the request's menu."""
        ...

    def arguments(self, request: RoutingRequest, leaf: Node) -> Answer:
        """The model's arguments for `leaf`, asked right after choosing it."""
        ...


class ConstrainedPolicy:
    """Menu answers under the menu constraint, arguments under the leaf's JSON-schema
    constraint: both valid by construction (arguments can still be cut off at max tokens)."""

    name = "constrained"

    def __init__(self, engine: Engine, *, max_argument_tokens: int = MAX_ARGUMENT_TOKENS) -> None:
        self.engine = engine
        self.max_argument_tokens = max_argument_tokens

    def choose(self, request: RoutingRequest) -> Answer:
        result = self.engine.choose(request.prompt, request.menu.options)
        return Answer(value=result.choice, raw_text=result.choice, usage=result.usage,
                      detail={"probability": result.probabilities.get(result.choice),
                              "margin": result.margin})

    def arguments(self, request: RoutingRequest, leaf: Node) -> Answer:
        schema = leaf.parameters or EMPTY_OBJECT_SCHEMA
        generation = self.engine.generate(
            request.arguments_prompt(leaf), constraint=Constraint.json(schema),
            sampling=SamplingOptions(max_tokens=self.max_argument_tokens))
        return read_arguments(generation.text, leaf, generation.usage,
                              finish_reason=generation.finish_reason)


class JsonProtocolPolicy:
    """The paper's protocol: unconstrained generation, parsed afterwards. The choice must be
    exactly one JSON object `{"choice": "<option>"}` naming a menu option (surrounding
    whitespace allowed); the arguments exactly one JSON object valid for the leaf's schema.
    Use it with `JsonProtocolLayout`, whose prompts ask for that format."""

    name = "json-unconstrained"

    def __init__(self, engine: Engine, *, max_argument_tokens: int = MAX_ARGUMENT_TOKENS,
                 max_choice_tokens: int = MAX_CHOICE_TOKENS) -> None:
        self.engine = engine
        self.max_argument_tokens = max_argument_tokens
        self.max_choice_tokens = max_choice_tokens

    def choose(self, request: RoutingRequest) -> Answer:
        generation = self.engine.generate(
            request.prompt, sampling=SamplingOptions(max_tokens=self.max_choice_tokens))
        choice, problem, lenient = parse_choice(generation.text, request.menu.options)
        return Answer(value=choice, raw_text=generation.text, usage=generation.usage,
                      problem=problem, is_lenient_valid=lenient,
                      detail={"finish_reason": generation.finish_reason})

    def arguments(self, request: RoutingRequest, leaf: Node) -> Answer:
        generation = self.engine.generate(
            request.arguments_prompt(leaf),
            sampling=SamplingOptions(max_tokens=self.max_argument_tokens))
        return read_arguments(generation.text, leaf, generation.usage,
                              finish_reason=generation.finish_reason)


def parse_choice(text: str, options: tuple[str, ...]) -> tuple[str | None, str | None, bool]:
    """(choice, problem, lenient_ok) for a JSON-protocol answer.

    >>> parse_choice(' {"choice": "pay_bill"}\\n', ("pay_bill", "DONE"))
    ('pay_bill', None, True)
    >>> parse_choice('Sure! {"choice": "DONE"}', ("pay_bill", "DONE"))[1:]
    ('not one JSON object: Sure! {"choice": "DONE"}', True)
    >>> parse_choice('{"choice": "refund"}', ("pay_bill", "DONE"))[1]
    "'refund' is not a menu option"
    """
    obj = _strict_object(text)
    lenient = _first_object(text)
    lenient_ok = isinstance(lenient, dict) and lenient.get("choice") in options
    if obj is None:
        return None, f"not one JSON object: {_clip(text)}", lenient_ok
    choice = obj.get("choice")
    if not isinstance(choice, str):
        return None, f"no string 'choice' in {_clip(text)}", lenient_ok
    if choice not in options:
        return None, f"{choice!r} is not a menu option", lenient_ok
    return choice, None, True


def read_arguments(text: str, leaf: Node, usage: Usage, *, finish_reason: str) -> Answer:
    """Arguments text read strictly: one JSON object that validates against the schema."""
    obj = _strict_object(text)
    lenient = _first_object(text)
    lenient_ok = isinstance(lenient, dict) and not argument_errors(leaf.parameters, lenient)
    detail = {"finish_reason": finish_reason}
    if obj is None:
        problem = ("cut off at max tokens: " if finish_reason == "length" else
                   "not one JSON object: ") + _clip(text)
        return Answer(value=None, raw_text=text, usage=usage, problem=problem,
                      is_lenient_valid=lenient_ok, detail=detail)
    errors = argument_errors(leaf.parameters, obj)
    if errors:
        return Answer(value=None, raw_text=text, usage=usage, is_lenient_valid=False,
                      problem="schema: " + "; ".join(errors[:3]), detail=detail)
    return Answer(value=obj, raw_text=text, usage=usage, detail=detail)


class PolicyRouter:
    """A runtime `Router` from a policy: the model's own choice, then for a leaf its own
    arguments (a free run). An unreadable answer goes to the machine as a misstep."""

    def __init__(self, policy: RoutingPolicy) -> None:
        self.policy = policy

    def route(self, request: RoutingRequest) -> Decision:
        choice = self.policy.choose(request)
        if choice.value is None:
            return Decision(choice=choice.raw_text.strip() or "<empty>", raw_text=choice.raw_text,
                            usage=choice.usage)
        child = request.node.child(choice.value)
        if child is None or not child.is_leaf:
            return Decision(choice=choice.value, usage=choice.usage, raw_text=choice.raw_text)
        args = self.policy.arguments(request, child)
        arguments = args.value if args.value is not None else {"_unparsed": args.raw_text}
        return Decision(choice=choice.value, arguments=arguments, raw_text=choice.raw_text,
                        usage=choice.usage + args.usage,
                        detail={"arguments_text": args.raw_text})


def _strict_object(text: str) -> dict[str, Any] | None:
    try:
        obj = json.loads(text.strip())
    except json.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) else None


def _first_object(text: str) -> Any:
    start = text.find("{")
    if start < 0:
        return None
    try:
        obj, _ = json.JSONDecoder().raw_decode(text[start:])
    except json.JSONDecodeError:
        return None
    return obj


def _clip(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
