"""What the console tests serve: a small bank catalog (with an overlap for the lint to find)
and an engine that routes by keywords instead of a model, built by `stackroute serve
--engine console_kit:build_keyword_engine` (tests/ on PYTHONPATH). It satisfies the Engine
protocol without inheriting."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from stackroute.runtime.menu import CompletionState
from stackroute.runtime.prompt import Prompt
from stackroute.runtime.tree import CapabilityTree
from stackroute.runtime.usage import Usage
from stackroute.server.engines.base import (
    Constraint,
    EngineInfo,
    Generation,
    MenuResult,
    PrepareStats,
    PromptInput,
    SamplingOptions,
)

SEND_MONEY = {"type": "object", "properties": {"payee": {"type": "string"},
                                               "amount": {"type": "number"}},
              "required": ["payee", "amount"], "additionalProperties": False}
# bank ├── payments (router): send_money (sensitive), transfer_money (sensitive), balance
#      └── weather (leaf)
BANK: dict[str, Any] = {
    "name": "bank",
    "description": "Banking tools",
    "children": [
        {"name": "payments", "description": "Send, receive and track payments.",
         "children": [
             {"name": "send_money", "description": "Send money to a contact.",
              "parameters": SEND_MONEY, "sensitive": True},
             {"name": "transfer_money", "description": "Send money to a contact.",
              "parameters": SEND_MONEY, "sensitive": True},
             {"name": "balance", "description": "Show the balance of the account."},
         ]},
        {"name": "weather", "description": "Weather forecast for a city.",
         "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                        "required": ["city"]}},
    ],
}
# A request's keyword → the path the engine takes and the leaf's arguments.
ROUTES: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "asha": (("payments", "send_money"), {"payee": "Asha", "amount": 5}),
    "funds": (("payments", "balance"), {}),
    "umbrella": (("weather",), {"city": "Lisbon"}),
}
SLOW_WORD, SLOW_S = "slowly", 1.0  # a request with this word takes SLOW_S per routing call


class KeywordEngine:
    """Routes the request by its keyword (ROUTES) and answers DONE once the leaf was called;
    option probabilities favour the choice (0.8) and spread the rest, as a model's would."""

    info = EngineInfo(engine="keyword", model="keyword", max_context_tokens=1 << 16)

    def __init__(self, *, delay_s: float = 0.0, **options: Any) -> None:
        self.delay_s = delay_s

    def count_tokens(self, prompt: PromptInput) -> int:
        text = prompt if isinstance(prompt, str) else " ".join(m.content
                                                                for m in prompt.messages)
        return len(text.split())

    def prepare(self, tree: CapabilityTree) -> PrepareStats:
        return PrepareStats(num_menus=sum(1 for _ in tree.routers()),
                            num_schemas=sum(1 for _ in tree.leaves()), compile_ms=0.0)

    def choose(self, prompt: Prompt, options: Sequence[str], *,
               option_bias: Mapping[str, float] | None = None) -> MenuResult:
        time.sleep(self.delay_s + (SLOW_S if SLOW_WORD in _request(prompt) else 0.0))
        path, arguments = _route(prompt)
        answered = {m.content for m in prompt.messages if m.role == "assistant"}
        choice = next((o for o in path if o in options and o not in answered), None)
        if choice is None:  # a value menu (routing/arguments): the route's value, if offered
            choice = next((o for o in map(str, arguments.values()) if o in options), None)
        if choice is None:
            done = CompletionState.DONE.value
            choice = done if done in options else CompletionState.BACK.value
        rest = [o for o in options if o != choice]
        weights = [1.0 / (i + 2) for i in range(len(rest))]
        probabilities = {choice: 0.8, **{o: 0.2 * w / sum(weights)
                                         for o, w in zip(rest, weights, strict=True)}}
        tokens = self.count_tokens(prompt)
        return MenuResult(choice=choice, probabilities=probabilities, margin=2.0,
                          usage=Usage(model_calls=1, prompt_tokens=tokens,
                                      prefill_tokens=min(tokens, 24),
                                      cached_tokens=max(tokens - 24, 0), generated_tokens=1,
                                      forward_passes=1, latency_ms=3.0))

    def generate(self, prompt: PromptInput, *, constraint: Constraint | None = None,
                 sampling: SamplingOptions | None = None) -> Generation:
        if not isinstance(prompt, Prompt):
            raise TypeError("KeywordEngine generates arguments for chat prompts only")
        _, arguments = _route(prompt)
        text = json.dumps(arguments)
        return Generation(text=text, finish_reason="stop",
                          usage=Usage(model_calls=1, generated_tokens=len(text.split())))

    def metrics(self) -> dict[str, float]:
        return {}


def _request(prompt: Prompt) -> str:
    return next((line for m in prompt.messages for line in m.content.splitlines()
                 if line.startswith("Request: ")), "").lower()


def _route(prompt: Prompt) -> tuple[tuple[str, ...], dict[str, Any]]:
    request = _request(prompt)
    for keyword, (path, arguments) in ROUTES.items():
        if keyword in request:
            return path, arguments
    return (), {}


def build_keyword_engine(**options: Any) -> KeywordEngine:
    """The factory `stackroute serve --engine console_kit:build_keyword_engine` calls."""
    return KeywordEngine(**{k: v for k, v in options.items() if k == "delay_s"})
