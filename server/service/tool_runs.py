"""A chat request with tools, routed through their tree: one turn of a run that the client's
tool results continue.

A turn steps the stack machine until it decides a leaf call (handed to the client as a
`tool_call`; the machine does not run it) or the run ends without one. The run's state at
that call is kept under the call's id (`ToolRunStore`, bounded, least recently used
forgotten), and the `tool_call` id names it: `call_<run id>_<n>`. A later request whose
conversation ends with the `tool` message answering that id resumes the same stack: the
result goes to the frame that made the call (as a server-side leaf result would, through an
executor that hands back the client's result), and routing goes on from there, to the next
call or to the end. Resuming reads a copy of the kept state, so a client may retry a turn.

`tool_choice`: `auto` routes as the service routes; `required` takes DONE off the root's menu
(the run must call something); a named function skips the menus and generates only that
leaf's arguments under its schema.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from stackroute.runtime.decision import Decision
from stackroute.runtime.errors import InputError, StateError
from stackroute.runtime.governance import RunStatus
from stackroute.runtime.handlers import LeafOutcome
from stackroute.runtime.machine import StackMachine
from stackroute.runtime.menu import CompletionState, Menu
from stackroute.runtime.router import Router, RoutingRequest
from stackroute.runtime.state import PendingCall, RunState
from stackroute.runtime.trace import EventKind, TraceEvent
from stackroute.runtime.tree import PATH_SEP, Node
from stackroute.runtime.usage import Usage
from stackroute.server.engines.base import EMPTY_OBJECT_SCHEMA, Constraint, SamplingOptions
from stackroute.server.routing.options import RouterOptions
from stackroute.server.routing.router import build_machine
from stackroute.server.service.prompt_limits import check_prompt_limits
from stackroute.server.service.route_call import RouteContext
from stackroute.server.service.tool_catalogs import ToolCatalog

CALL_ID_PREFIX = "call_"


class ChoiceMode(StrEnum):
    AUTO = "auto"
    REQUIRED = "required"
    NAMED = "named"


class TurnOutcome(StrEnum):
    TOOL_CALL = "tool_call"  # a leaf call for the client to run
    NO_CALL = "no_call"  # the run finished without (another) call: answer in words
    LIMIT = "limit"  # a governance limit ended the run
    VALUES_NEEDED = "values_needed"  # the call waits for values the request lacked: ask


class UnknownToolRunError(StateError):
    """A `tool` message answers a call this server has no run for (forgotten or another
    server's)."""

    code = "unknown_tool_call"
    http_status = 409


@dataclass(frozen=True, kw_only=True)
class ToolResult:
    """The client's result of one call: the `tool` message's text (JSON is parsed)."""

    call_id: str  # the tool_call id as sent
    content: str


@dataclass(frozen=True, kw_only=True)
class ToolTurnRequest:
    task: str  # the user's words (`values_question.routed_task`); ignored when resuming
    mode: ChoiceMode = ChoiceMode.AUTO
    function: str | None = None  # the named function (mode NAMED)
    result: ToolResult | None = None  # resume the run that made this call


@dataclass(frozen=True, kw_only=True)
class ToolTurn:
    run_id: str
    outcome: TurnOutcome
    call: PendingCall | None  # TOOL_CALL: the call the client runs; VALUES_NEEDED: the one asking
    leaf: Node | None
    events: tuple[TraceEvent, ...]  # this turn's transitions
    usage: Usage  # this turn's model calls

    @property
    def routing_events(self) -> tuple[TraceEvent, ...]:
        return tuple(e for e in self.events if e.kind is EventKind.ROUTE)


def tool_call_id(call_id: str) -> str:
    """The OpenAI `tool_call` id of a pending call (`run:n` → `call_run_n`)."""
    return CALL_ID_PREFIX + call_id.replace(":", "_")


def machine_call_id(tool_call: str) -> str | None:
    """The machine's call id a `tool_call` id names, or None when it names none of ours.

    >>> machine_call_id("call_ab12_3"), machine_call_id("toolu_x")
    ('ab12:3', None)
    """
    if not tool_call.startswith(CALL_ID_PREFIX):
        return None
    run_id, _, n = tool_call.removeprefix(CALL_ID_PREFIX).rpartition("_")
    return f"{run_id}:{n}" if run_id and n.isdigit() else None


class ToolRunStore:
    """Run states waiting for a client's tool result, by the pending call's id (JSON, so a
    resumed turn works on its own copy)."""

    def __init__(self, max_runs: int) -> None:
        self.max_runs = max_runs
        self._states: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, state: RunState) -> None:
        if state.pending is None:
            return
        with self._lock:
            self._states[state.pending.call_id] = state.to_json()
            while len(self._states) > self.max_runs:
                self._states.popitem(last=False)

    def get(self, call_id: str) -> RunState | None:
        with self._lock:
            text = self._states.get(call_id)
            if text is not None:
                self._states.move_to_end(call_id)
        return None if text is None else RunState.from_json(text)


def run_tool_turn(catalog: ToolCatalog, request: ToolTurnRequest, context: RouteContext,
                  runs: ToolRunStore) -> ToolTurn:
    """One turn: start (or resume) the run and step it to its next call or its end. Runs in
    a worker thread (it makes model calls)."""
    if request.result is not None:
        state, executor = _resumed(catalog, request.result, runs)
        machine = _machine(catalog, context, executor)
    else:
        executor = _ClientResults({})
        machine = _machine(catalog, context, executor)
        state = _started(machine, catalog, request, context)
    if request.mode is ChoiceMode.REQUIRED:
        machine.router = _NoDoneAtRoot(machine.router)
    num_events = len(state.trace)
    usage_before = state.usage
    _advance(machine, state, context)
    events = tuple(state.trace[num_events:])
    usage = Usage.from_dict({k: v - usage_before.to_dict()[k]
                             for k, v in state.usage.to_dict().items()})
    if state.pending is not None and state.pending.is_waiting_for_values:
        # Not kept: the answer comes back as words, routed with the request they complete.
        return ToolTurn(run_id=state.run_id, outcome=TurnOutcome.VALUES_NEEDED,
                        call=state.pending, leaf=catalog.tree.get(state.pending.path),
                        events=events, usage=usage)
    runs.put(state)
    if state.pending is not None:
        return ToolTurn(run_id=state.run_id, outcome=TurnOutcome.TOOL_CALL, call=state.pending,
                        leaf=catalog.tree.get(state.pending.path), events=events, usage=usage)
    outcome = TurnOutcome.LIMIT if state.status is RunStatus.LIMIT else TurnOutcome.NO_CALL
    return ToolTurn(run_id=state.run_id, outcome=outcome, call=None, leaf=None, events=events,
                    usage=usage)


def _machine(catalog: ToolCatalog, context: RouteContext,
             executor: _ClientResults) -> StackMachine:
    if context.routers is not None:
        return context.routers.machine(catalog.tree, executor=executor)
    return build_machine(catalog.tree, context.engine, executor=executor,
                         options=context.options)


def _started(machine: StackMachine, catalog: ToolCatalog, request: ToolTurnRequest,
             context: RouteContext) -> RunState:
    if request.mode is not ChoiceMode.NAMED:
        return machine.start(request.task)
    leaf = catalog.leaf_for(request.function or "")
    if leaf is None:
        raise InputError(f"tool_choice names function {request.function!r}, which is not "
                         "in tools")
    state = machine.start(request.task, at=PATH_SEP.join(leaf.path[:-1]))
    options = context.options or RouterOptions()
    machine.router = _Forced(leaf, context, max_tokens=options.max_argument_tokens)
    return state


def _resumed(catalog: ToolCatalog, result: ToolResult,
             runs: ToolRunStore) -> tuple[RunState, _ClientResults]:
    call_id = machine_call_id(result.call_id)
    state = None if call_id is None else runs.get(call_id)
    if state is None or state.pending is None or call_id is None:
        raise UnknownToolRunError(
            f"tool message for call {result.call_id!r}: this server has no run waiting for "
            "it (forgotten after a restart or beyond max_tool_runs, or not one of ours)")
    if state.catalog != catalog.tree.name:
        raise InputError(f"call {result.call_id!r} was made with another tools list")
    if state.status is RunStatus.PAUSED and state.pending.is_gated:
        state.pending.is_gated = False  # the client ran it: that was its confirmation
        state.status = RunStatus.RUNNING
    return state, _ClientResults({call_id: LeafOutcome(result=_parsed(result.content))})


def _advance(machine: StackMachine, state: RunState, context: RouteContext) -> None:
    """Step until a leaf call waits for the client or the run ends (a pending call with a
    result from the client is executed first: that is how a resumed run continues)."""
    executor = machine.executor
    while state.status is RunStatus.RUNNING:
        request = None
        if state.pending is not None:
            if not isinstance(executor, _ClientResults) or \
                    state.pending.call_id not in executor.outcomes:
                return  # the client runs this one
        else:  # rendered once: checked against the limits, then routed
            request = check_prompt_limits(context.engine, machine, state, context.limits)
        machine.step(state, request)
    if state.status is RunStatus.PAUSED and state.pending is not None:
        return  # a gated leaf: the client runs it (running it is its confirmation)


def _parsed(content: str) -> Any:
    try:
        return json.loads(content)
    except ValueError:
        return content


class _ClientResults:
    """An executor that hands back the results the client sent, by call id."""

    def __init__(self, outcomes: Mapping[str, LeafOutcome]) -> None:
        self.outcomes = dict(outcomes)

    def execute(self, leaf: Node, arguments: Mapping[str, Any], call_id: str) -> LeafOutcome:
        outcome = self.outcomes.get(call_id)
        if outcome is None:  # _advance never steps a pending call it has no result for
            raise RuntimeError(f"no client result for call {call_id}")
        return outcome


class _NoDoneAtRoot:
    """`tool_choice: required`: the root's menu without DONE (the run must call a tool)."""

    def __init__(self, inner: Router) -> None:
        self.inner = inner

    def route(self, request: RoutingRequest) -> Decision:
        menu = request.menu
        if request.depth == 0 and menu.children and CompletionState.DONE in menu.states:
            states = tuple(s for s in menu.states if s is not CompletionState.DONE)
            request = replace(request, menu=Menu(menu.node_path, menu.children, states))
        return self.inner.route(request)


class _Forced:
    """A named function: no menu decision, only the leaf's arguments under its schema."""

    def __init__(self, leaf: Node, context: RouteContext, *, max_tokens: int) -> None:
        self.leaf = leaf
        self.context = context
        self.max_tokens = max_tokens

    def route(self, request: RoutingRequest) -> Decision:
        child = request.node.child(self.leaf.name)
        if child is None or child.path_str != self.leaf.path_str:
            raise RuntimeError("the named function's run is not at its parent")  # our bug
        schema = self.leaf.parameters or EMPTY_OBJECT_SCHEMA
        generation = self.context.engine.generate(
            request.arguments_prompt(self.leaf), constraint=Constraint.json(schema),
            sampling=SamplingOptions(max_tokens=self.max_tokens))
        try:
            arguments = json.loads(generation.text)
        except ValueError:
            arguments = None  # cut off: the machine records a misstep
        return Decision(choice=self.leaf.name,
                        arguments=arguments if isinstance(arguments, dict) else {},
                        probabilities={self.leaf.name: 1.0}, usage=generation.usage,
                        detail={"arguments_text": generation.text, "tool_choice": "named",
                                "arguments_finish_reason": generation.finish_reason})
