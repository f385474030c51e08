"""Helpers for the session and routing-API tests: a bank catalog, an engine that follows a plan
(no model), handlers that log every execution to a file, and a way to wait for a session."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from stackroute.runtime.governance import RunStatus
from stackroute.runtime.handlers import HandlerTable
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
from stackroute.server.service.store import SessionStore

SEND_MONEY_SCHEMA = {
    "type": "object",
    "properties": {"payee": {"type": "string"}, "amount": {"type": "number"}},
    "required": ["payee", "amount"],
    "additionalProperties": False,
}

# bank
# ├── payments            (router)
# │   ├── send_money      (leaf, sensitive)
# │   └── balance         (leaf, no arguments)
# └── weather             (leaf, city: string)
BANK_CATALOG: dict[str, Any] = {
    "name": "Bank Tools",
    "description": "Banking tools",
    "children": [
        {"name": "payments", "description": "Send, receive and track payments.",
         "children": [
             {"name": "send_money", "description": "Send money to a contact.",
              "parameters": SEND_MONEY_SCHEMA, "sensitive": True},
             {"name": "balance", "description": "Show the balance."},
         ]},
        {"name": "weather", "description": "Weather for a city.",
         "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                        "required": ["city"]}},
    ],
}
SEND_PLAN = ("payments", "send_money")
SEND_ARGUMENTS = {"send_money": {"payee": "Asha", "amount": 5}}


class PlanEngine:
    """An engine that follows a plan instead of a model (it satisfies the Engine protocol
    without inheriting).

    At each menu it picks the first planned option on offer that the prompt has not answered
    yet, else DONE (or BACK). The choice is a pure function of the prompt, so a resumed run
    continues exactly as an uninterrupted one would. Leaf arguments come from `arguments` by
    leaf name. `gate`, when set, is waited on before every choice (to hold a run mid-step).
    """

    def __init__(self, plan: Sequence[str] = SEND_PLAN,
                 arguments: Mapping[str, Mapping[str, Any]] | None = None, *,
                 gate: threading.Event | None = None, fail_at: str | None = None) -> None:
        self.info = EngineInfo(engine="plan", model="plan", max_context_tokens=1 << 20)
        self.plan = tuple(plan)
        self.arguments = dict(SEND_ARGUMENTS if arguments is None else arguments)
        self.gate = gate
        self.fail_at = fail_at  # raise when this option would be chosen
        self.prepared: list[str] = []
        self.num_choices = 0

    def count_tokens(self, prompt: PromptInput) -> int:
        text = prompt if isinstance(prompt, str) else " ".join(m.content
                                                                for m in prompt.messages)
        return len(text.split())

    def prepare(self, tree: CapabilityTree) -> PrepareStats:
        self.prepared.append(tree.name)
        return PrepareStats(num_menus=sum(1 for _ in tree.routers()),
                            num_schemas=sum(1 for _ in tree.leaves()), compile_ms=0.0)

    def choose(self, prompt: Prompt, options: Sequence[str], *,
               option_bias: Mapping[str, float] | None = None) -> MenuResult:
        if self.gate is not None:
            self.gate.wait(timeout=30)
        self.num_choices += 1
        if "copied from the request" in prompt.messages[-1].content:
            # A value menu (routing/arguments): answer outside it, so the router asks
            # `generate` for the arguments, which come from `arguments` as planned.
            return MenuResult(choice="", probabilities={}, margin=0.0,
                              usage=Usage(model_calls=1))
        answered = {m.content for m in prompt.messages if m.role == "assistant"}
        choice = next((o for o in self.plan if o in options and o not in answered), None)
        if choice is None:
            done = CompletionState.DONE.value
            choice = done if done in options else CompletionState.BACK.value
        if choice == self.fail_at:
            raise RuntimeError(f"engine failure at {choice}")
        rest = (1.0 - 0.9) / max(len(options) - 1, 1)
        probabilities = {o: 0.9 if o == choice else rest for o in options}
        return MenuResult(choice=choice, probabilities=probabilities, margin=2.0,
                          usage=Usage(model_calls=1, prompt_tokens=self.count_tokens(prompt),
                                      prefill_tokens=3, cached_tokens=7, generated_tokens=1,
                                      forward_passes=1, latency_ms=1.5))

    def generate(self, prompt: PromptInput, *, constraint: Constraint | None = None,
                 sampling: SamplingOptions | None = None) -> Generation:
        if not isinstance(prompt, Prompt):
            raise TypeError("PlanEngine generates arguments for chat prompts only")
        # The answer naming the leaf: the last assistant turn that names a planned leaf (the
        # arguments ask and any value answers come after it).
        leaf = next((m.content for m in reversed(prompt.messages)
                     if m.role == "assistant" and m.content in self.arguments), "")
        text = json.dumps(self.arguments.get(leaf, {}))
        return Generation(text=text, finish_reason="stop",
                          usage=Usage(model_calls=1, generated_tokens=len(text.split())))

    def metrics(self) -> dict[str, float]:
        return {"choices": float(self.num_choices)}


def logging_handlers(log_path: Path) -> HandlerTable:
    """Handlers that append one JSON line per execution to `log_path`."""

    def record(name: str) -> Callable[..., Any]:
        def handler(**arguments: Any) -> dict[str, Any]:
            with open(log_path, "a", encoding="utf-8") as f:
                f.write(json.dumps({"leaf": name, "arguments": arguments}) + "\n")
            return {"ok": True, "leaf": name, **arguments}
        return handler

    return HandlerTable({"payments/send_money": record("send_money"),
                         "payments/balance": record("balance"),
                         "weather": record("weather")})


def executions(log_path: Path) -> list[dict[str, Any]]:
    if not log_path.exists():
        return []
    return [json.loads(line) for line in log_path.read_text().splitlines() if line.strip()]


def wait_for_status(store: SessionStore, session_id: str,
                    statuses: Sequence[RunStatus] = (), *, timeout_s: float = 10.0,
                    ) -> RunStatus:
    """Poll the store until the session's status is one of `statuses` (default: anything but
    running); fail after `timeout_s`."""
    wanted = set(statuses) or {s for s in RunStatus if s is not RunStatus.RUNNING}
    deadline = time.monotonic() + timeout_s
    while True:
        row = store.session_row(session_id)
        if row is not None and row.status in wanted:
            return row.status
        if time.monotonic() > deadline:
            raise TimeoutError(f"session {session_id} is {row and row.status}, not one of "
                               f"{sorted(wanted)}")
        time.sleep(0.01)
