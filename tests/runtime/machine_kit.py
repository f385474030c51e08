"""Helpers for the stack-machine tests: a small bank catalog, a driver and views of a trace."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from stackroute.runtime.catalog import build_tree
from stackroute.runtime.governance import Limits, RunStatus
from stackroute.runtime.handlers import HandlerTable, LocalExecutor
from stackroute.runtime.machine import StackMachine
from stackroute.runtime.router import Router, ScriptedRouter, ScriptStep
from stackroute.runtime.state import PendingCall, RunState
from stackroute.runtime.tree import CapabilityTree

SEND_MONEY_SCHEMA = {
    "type": "object",
    "properties": {"payee": {"type": "string"}, "amount": {"type": "number"}},
    "required": ["payee", "amount"],
    "additionalProperties": False,
}

# root
# ├── payments                 (router)
# │   ├── send_money           (leaf, sensitive)
# │   └── balance              (leaf, no arguments)
# ├── accounts                 (router)
# │   ├── open_account         (leaf, kind: savings|checking)
# │   └── statements           (router)
# │       └── monthly          (leaf, month: integer 1..12)
# └── weather                  (leaf, city: string)
BANK_CATALOG: dict[str, Any] = {
    "name": "bank",
    "description": "Banking tools",
    "children": [
        {
            "name": "payments",
            "description": "Send, receive and track payments.",
            "children": [
                {"name": "send_money", "description": "Send money to a contact.",
                 "parameters": SEND_MONEY_SCHEMA, "sensitive": True},
                {"name": "balance", "description": "Show the balance."},
            ],
        },
        {
            "name": "accounts",
            "description": "Open accounts and read statements.",
            "children": [
                {"name": "open_account", "description": "Open a new account.",
                 "parameters": {"type": "object",
                                "properties": {"kind": {"enum": ["savings", "checking"]}},
                                "required": ["kind"]}},
                {
                    "name": "statements",
                    "description": "Account statements.",
                    "children": [
                        {"name": "monthly", "description": "A monthly statement.",
                         "parameters": {"type": "object",
                                        "properties": {"month": {"type": "integer",
                                                                 "minimum": 1,
                                                                 "maximum": 12}},
                                        "required": ["month"]}},
                    ],
                },
            ],
        },
        {"name": "weather", "description": "Weather for a city.",
         "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                        "required": ["city"]}},
    ],
}


def bank_tree() -> CapabilityTree:
    return build_tree(BANK_CATALOG)


def bank_handlers() -> HandlerTable:
    return HandlerTable({
        "payments/balance": lambda: {"balance": 120},
        "payments/send_money": lambda payee, amount: {"sent": amount, "to": payee},
        "accounts/open_account": lambda kind: {"account": f"{kind}-1"},
        "accounts/statements/monthly": lambda month: {"month": month, "lines": 3},
    })


def counting_clock(start: float = 1_000.0) -> Callable[[], float]:
    """A clock that moves one second per reading, so times differ between events and runs."""
    counter = itertools.count()
    return lambda: start + next(counter)


def make_machine(script: list[ScriptStep] | Callable[..., ScriptStep] | Router, *,
                 tree: CapabilityTree | None = None, handlers: HandlerTable | None = None,
                 limits: Limits | None = None,
                 clock: Callable[[], float] | None = None) -> StackMachine:
    router = script if hasattr(script, "route") else ScriptedRouter(script)  # type: ignore[arg-type]
    return StackMachine(tree or bank_tree(), router,  # type: ignore[arg-type]
                        executor=LocalExecutor(handlers or bank_handlers(), timeout_s=5.0),
                        limits=limits, clock=clock or counting_clock())


def approve_all(pending: PendingCall) -> bool:
    return True


def drive(machine: StackMachine, state: RunState, *,
          gate: Callable[[PendingCall], bool] = approve_all,
          max_transitions: int | None = None) -> int:
    """Step (and approve or reject at gates, as `gate` says) until the run is final.

    Returns the number of transitions made; stops early after `max_transitions`.
    """
    n = 0
    while not state.status.is_final:
        if max_transitions is not None and n >= max_transitions:
            break
        if state.status is RunStatus.PAUSED:
            assert state.pending is not None
            if gate(state.pending):
                machine.approve(state, state.pending.digest)
            else:
                machine.reject(state, state.pending.digest)
        else:
            machine.step(state)
        n += 1
    return n


def events(state: RunState) -> list[tuple[str, str]]:
    """The trace as (kind, path) pairs."""
    return [(e.kind.value, e.path) for e in state.trace]


def route_menus(state: RunState) -> list[tuple[str, tuple[str, ...], str]]:
    """(path, menu, decision) of every routing call."""
    return [(e.path, e.menu or (), e.decision or "") for e in state.trace
            if e.kind.value == "route"]


def comparable(state: RunState) -> list[dict[str, Any]]:
    return [e.comparable() for e in state.trace]


class RecordingRouter:
    """Wraps a router and keeps every routing call's prompt, in call order."""

    def __init__(self, inner: Router) -> None:
        self.inner = inner
        self.prompts: list[Any] = []

    def route(self, request: Any) -> Any:
        self.prompts.append(request.prompt)
        return self.inner.route(request)


def check_prefix_discipline(state: RunState, prompts: list[Any]) -> int:
    """Assert the append-only layout over a run; return how many calls followed a pop.

    Every routing call's prompt extends the previous one (whole messages), except right after
    a pop, where it is exactly the prompt of the last call made in the frame now on top (the
    call that delegated) plus that delegation's answer and the result turn the pop appended.
    """
    from stackroute.runtime.prompt import answer

    routes = [e for e in state.trace if e.kind.value == "route"]
    assert len(routes) == len(prompts)
    num_after_pop = 0
    for i in range(1, len(routes)):
        between = state.trace[routes[i - 1].seq + 1: routes[i].seq]
        pops = [e for e in between if e.kind.value in ("pop_done", "pop_back")]
        prev, cur = prompts[i - 1].messages, prompts[i].messages
        if not pops:
            assert len(cur) > len(prev)
            assert cur[: len(prev)] == prev, f"call {i} does not extend call {i - 1}"
            continue
        num_after_pop += 1
        j = max(k for k in range(i) if routes[k].frame_id == routes[i].frame_id)
        child = pops[-1].path.rsplit("/", 1)[-1]
        assert routes[j].decision == child
        earlier = prompts[j].messages
        assert cur[: len(earlier)] == earlier
        assert cur[len(earlier)] == answer(child)
        assert len(cur) == len(earlier) + 2
        assert cur[-1].role == "user"
        assert cur[-1].content.startswith(f"{child} finished: " if pops[-1].kind.value ==
                                          "pop_done" else f"{child}: ")
    return num_after_pop
