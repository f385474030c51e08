"""A deterministic engine for the reliability harnesses: it follows a plan written in the request.

Why not the embedded model: the crash harness restarts `stackroute serve` 50+ times, and the
embedded model costs 15-30 s to load on a busy CPU and picks DONE at the root for most
requests (DESIGN.md), so its sessions would rarely reach a confirmation gate. Single-option
menus are not an escape: every menu also offers DONE or BACK, so the model decides each one.
This engine decides as a pure function of the prompt instead, so a session resumed after a
crash decides exactly as an uninterrupted run does, and an operator loads it the way they load
any engine outside the package: `--engine stackroute.bench.scripted_engine:create`.

The request carries the plan: `job=J7 amount=42 plan: payments domestic send_transfer cards`.
At each menu the engine picks the first plan name on offer that the prompt has not answered
yet, else DONE when offered, else BACK (so plan names must be unique within a session). A
leaf's arguments follow its JSON schema: strings get the job tag, numbers the amount, booleans
true. Each routing call sleeps `delay_s` to stand in for a model call, so a kill at a random
moment can land inside one.

>>> engine = ScriptedEngine(delay_s=0)
>>> from stackroute.runtime.messages import Message
>>> from stackroute.runtime.prompt import Prompt
>>> prompt = Prompt((Message("user", "Request: job=J1 amount=3 plan: cards\\n\\nOptions: …"),))
>>> engine.choose(prompt, ["payments", "cards", "DONE"]).choice
'cards'
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from stackroute.runtime.menu import CompletionState
from stackroute.runtime.prompt import Prompt
from stackroute.runtime.tree import CapabilityTree
from stackroute.runtime.usage import Usage
from stackroute.server.engines.base import (
    Constraint,
    ConstraintKind,
    DeltaSink,
    EngineInfo,
    Generation,
    MenuResult,
    PrepareStats,
    PromptInput,
    SamplingOptions,
    TextDelta,
)

DEFAULT_DELAY_S = 0.01  # one routing call; the embedded model takes 10-100x longer
_PLAN = re.compile(r"plan:\s*([\w\- ]*)")
_JOB = re.compile(r"job=(\S+)")
_AMOUNT = re.compile(r"amount=(\d+)")
_VALUE_ASK = re.compile(r"Value of \S+, copied from the request")  # runtime.prompt.value_ask


class ScriptedEngine:
    """Satisfies the Engine protocol without inheriting (STYLE.md 3)."""

    def __init__(self, *, delay_s: float = DEFAULT_DELAY_S) -> None:
        self.info = EngineInfo(engine="scripted", model="plan-in-request",
                               max_context_tokens=1 << 20)
        self.delay_s = delay_s
        self._lock = threading.Lock()
        self._counters = {"menu_calls": 0.0, "generate_calls": 0.0}

    def count_tokens(self, prompt: PromptInput) -> int:
        return len(_text(prompt).split())

    def prepare(self, tree: CapabilityTree) -> PrepareStats:
        return PrepareStats(num_menus=sum(1 for _ in tree.routers()),
                            num_schemas=sum(1 for _ in tree.leaves()), compile_ms=0.0)

    def choose(self, prompt: Prompt, options: Sequence[str], *,
               option_bias: Mapping[str, float] | None = None) -> MenuResult:
        if self.delay_s:
            time.sleep(self.delay_s)
        with self._lock:
            self._counters["menu_calls"] += 1
        if _VALUE_ASK.search(prompt.messages[-1].content):
            # A value menu (server/routing/arguments): answer outside it, so the router
            # writes the value as JSON (`generate`: the job tag, the amount), the same
            # arguments as before value menus and a pure function of the request (a menu of
            # request words would hand a plan name to `ref`).
            return MenuResult(choice="", probabilities={}, margin=0.0,
                              usage=Usage(model_calls=1, generated_tokens=1,
                                          prompt_tokens=self.count_tokens(prompt)))
        plan = _plan(prompt)
        answered = {m.content for m in prompt.messages if m.role == "assistant"}
        choice = next((o for o in plan if o in options and o not in answered), None)
        if choice is None:
            done = CompletionState.DONE.value
            choice = done if done in options else CompletionState.BACK.value
            if choice not in options:  # a menu of children only: take the first
                choice = options[0]
        rest = 0.1 / max(len(options) - 1, 1)
        probabilities = {o: 0.9 if o == choice else rest for o in options}
        if len(options) == 1:
            probabilities = {choice: 1.0}
        return MenuResult(choice=choice, probabilities=probabilities, margin=2.0,
                          usage=Usage(model_calls=1, prompt_tokens=self.count_tokens(prompt),
                                      generated_tokens=1, forward_passes=1))

    def generate(self, prompt: PromptInput, *, constraint: Constraint | None = None,
                 sampling: SamplingOptions | None = None) -> Generation:
        with self._lock:
            self._counters["generate_calls"] += 1
        if constraint is not None and constraint.kind is ConstraintKind.CHOICE:
            text = constraint.choices[0]
        elif constraint is not None and constraint.kind is ConstraintKind.JSON:
            text = json.dumps(arguments_for(constraint.schema or {}, _text(prompt)))
        else:
            text = "ok"
        return Generation(text=text, finish_reason="stop",
                          usage=Usage(model_calls=1, generated_tokens=len(text.split())))

    def generate_stream(self, prompt: PromptInput, *, on_delta: DeltaSink,
                        constraint: Constraint | None = None,
                        sampling: SamplingOptions | None = None) -> Generation:
        """`generate`, its answer sent as one delta."""
        gen = self.generate(prompt, constraint=constraint, sampling=sampling)
        if gen.text:
            on_delta(TextDelta(gen.text))
        return gen

    def metrics(self) -> dict[str, float]:
        with self._lock:
            return dict(self._counters)


def create(**options: Any) -> ScriptedEngine:
    """The factory `--engine stackroute.bench.scripted_engine:create` calls (the `model`
    and `base_url` options mean nothing here and are ignored)."""
    return ScriptedEngine()


PACED_DELAY_S = 0.2  # a routing call as long as a served model's, so kills land mid-session


def create_paced(**options: Any) -> ScriptedEngine:
    """`--engine stackroute.bench.scripted_engine:create_paced`: `PACED_DELAY_S` per routing
    call (the multi-instance crash run, where sessions must outlast several kills)."""
    return ScriptedEngine(delay_s=PACED_DELAY_S)


def arguments_for(schema: Mapping[str, Any], request: str) -> dict[str, Any]:
    """Arguments for an object schema, from the request's `job=` and `amount=`."""
    job = _JOB.search(request)
    amount = _AMOUNT.search(request)
    out: dict[str, Any] = {}
    properties: Mapping[str, Any] = schema.get("properties", {})
    for name, spec in properties.items():
        kind = spec.get("type") if isinstance(spec, Mapping) else None
        if kind == "string":
            out[name] = job.group(1) if job else "none"
        elif kind in ("integer", "number"):
            out[name] = int(amount.group(1)) if amount else 1
        elif kind == "boolean":
            out[name] = True
    return out


def _plan(prompt: Prompt) -> list[str]:
    request = next((m.content for m in prompt.messages if m.role == "user"), "")
    found = _PLAN.search(request)
    return found.group(1).split() if found else []


def _text(prompt: PromptInput) -> str:
    if isinstance(prompt, str):
        return prompt
    return "\n".join(m.content for m in prompt.messages)
