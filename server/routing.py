"""Adapts an engine to the runtime's `Router`, and wires a stack machine for a catalog."""

from __future__ import annotations

import json
from dataclasses import dataclass

from stackroute.runtime.decision import Decision
from stackroute.runtime.flat import flatten
from stackroute.runtime.governance import Limits
from stackroute.runtime.handlers import Executor
from stackroute.runtime.machine import StackMachine
from stackroute.runtime.prompt import PromptLayout, PromptStyle
from stackroute.runtime.router import RoutingRequest
from stackroute.runtime.tree import CapabilityTree
from stackroute.server.engines.base import Constraint, Engine, SamplingOptions

EMPTY_OBJECT_SCHEMA = {"type": "object", "properties": {}}


@dataclass(frozen=True, kw_only=True)
class RouterOptions:
    max_argument_tokens: int = 384


class EngineRouter:
    """A `Router` backed by an engine: a constrained menu choice, then for a leaf its
    arguments under the leaf's JSON-schema constraint (so both are always valid)."""

    def __init__(self, engine: Engine, options: RouterOptions | None = None) -> None:
        self.engine = engine
        self.options = options or RouterOptions()

    def route(self, request: RoutingRequest) -> Decision:
        result = self.engine.choose(request.prompt, request.menu.options)
        child = request.node.child(result.choice)
        detail: dict[str, object] = {"margin": result.margin}
        if child is None or not child.is_leaf:
            return Decision(choice=result.choice, probabilities=result.probabilities,
                            margin=result.margin, usage=result.usage, detail=detail)
        generation = self.engine.generate(
            request.arguments_prompt(child),
            constraint=Constraint.json(child.parameters or EMPTY_OBJECT_SCHEMA),
            sampling=SamplingOptions(max_tokens=self.options.max_argument_tokens))
        detail["arguments_text"] = generation.text
        detail["arguments_finish_reason"] = generation.finish_reason
        try:
            arguments = json.loads(generation.text)
        except json.JSONDecodeError:
            arguments = None  # cut off by max tokens: the machine records a misstep
        if not isinstance(arguments, dict):
            arguments = {"_unparsed": generation.text}
        return Decision(choice=result.choice, arguments=arguments,
                        probabilities=result.probabilities, margin=result.margin,
                        usage=result.usage + generation.usage, detail=detail)


def build_machine(tree: CapabilityTree, engine: Engine, *, is_flat: bool = False,
                  limits: Limits | None = None, executor: Executor | None = None,
                  ) -> StackMachine:
    """A stack machine over `tree` (or its flat twin, whose menu lists every leaf with its
    schema, as the paper's flat baseline does) routed by `engine`."""
    if is_flat and any(not c.is_leaf for c in tree.root.children):
        tree = flatten(tree)
    layout = PromptLayout(tree, PromptStyle(show_schemas=is_flat))
    return StackMachine(tree, EngineRouter(engine), executor=executor, layout=layout,
                        limits=limits)
