"""One routing call for `/v1/route`: build the machine, start (or continue) the run, check
the server's limits, make the call, and say what it decided. Runs in a worker thread; the
HTTP module turns the result into its response."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stackroute.runtime.errors import InputError, StateError
from stackroute.runtime.governance import RunStatus
from stackroute.runtime.trace import EventKind, TraceEvent
from stackroute.runtime.tree import CapabilityTree
from stackroute.server.engines.base import Engine
from stackroute.server.routing.options import RouterOptions
from stackroute.server.routing.pool import RouterPool
from stackroute.server.service.outcomes import RouteOutcome, routing_outcome
from stackroute.server.service.prompt_limits import PromptLimits, check_prompt_limits
from stackroute.server.service.run_state_input import check_frames, parse_state


@dataclass(frozen=True, kw_only=True)
class RouteCall:
    """What a client asks: a decision at `node` for `task`, or the next one of `state`."""

    catalog: str
    node: str = ""
    task: str | None = None
    state: dict[str, Any] | None = None
    is_flat: bool = False
    include_state: bool = False


@dataclass(frozen=True, kw_only=True)
class RouteCallResult:
    event: TraceEvent  # the ROUTE event: decision, menu, probabilities, arguments, usage
    outcome: RouteOutcome
    misstep: str | None
    state: dict[str, Any] | None  # the run state after the call, when it is returned
    routing: dict[str, str | None]  # RouterOptions.describe(): policy, calibration, speculation
    # a leaf decision's values not taken from the request: written by the model, or left for
    # the user to give (the call it makes waits for them: `PendingCall.missing_values`)
    written_values: tuple[str, ...] = ()
    missing_values: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class RouteContext:
    """What every routing call shares: the engine, the prompt limits and the catalogs'
    long-lived routers (whose options say how they route)."""

    engine: Engine
    routers: RouterPool
    limits: PromptLimits = field(default_factory=PromptLimits)  # default: the product's

    @classmethod
    def for_engine(cls, engine: Engine, options: RouterOptions | None = None, *,
                   limits: PromptLimits | None = None) -> RouteContext:
        """A context of its own (the CLI's `route`): `options` None and `limits` None are
        the product's."""
        return cls(engine=engine, routers=RouterPool(engine, options),
                   limits=limits or PromptLimits())

    @property
    def options(self) -> RouterOptions:
        return self.routers.options


def route_once(tree: CapabilityTree, call: RouteCall, context: RouteContext) -> RouteCallResult:
    """Make one routing call, through the catalog's long-lived router (its evidence, caches
    and speculator: a path verified by an earlier call of the same run may answer, since the
    client sends the state back each time). The request is rendered once: the limits are
    checked on the very prompt the router reads."""
    if call.state is not None:
        run = parse_state(call.state)
        machine = context.routers.machine(tree, is_flat=run.is_flat)
        if run.catalog != machine.tree.name:
            raise InputError(f"the state is of catalog {run.catalog!r}, not "
                             f"{machine.tree.name!r}")
        check_frames(run, machine.tree)
        if run.pending is not None:
            raise StateError(f"the state has a pending call ({run.pending.path}); a routing "
                             "call needs a state without one")
    else:
        machine = context.routers.machine(tree, is_flat=call.is_flat)
        node = machine.tree.get(call.node)
        if node is None or node.is_leaf:
            raise InputError(f"no router at node path {call.node!r} in catalog "
                             f"{call.catalog!r}")
        if call.task is None:
            raise InputError("give exactly one of `query` and `messages` (or a `state`)")
        run = machine.start(call.task, at=call.node, is_flat=call.is_flat)
    request = None
    if run.status is RunStatus.RUNNING:
        request = check_prompt_limits(context.engine, machine, run, context.limits)
    num_events = len(run.trace)
    machine.step(run, request)
    new = run.trace[num_events:]
    event = next((e for e in new if e.kind is EventKind.ROUTE), None)
    if event is None:
        reason = next((dict(e.detail) for e in new if e.kind is EventKind.LIMIT), {})
        raise StateError(f"no routing call was made: the run reached a limit {reason}")
    return RouteCallResult(
        event=event, outcome=routing_outcome(machine.tree, event),
        misstep=next((e.error for e in new if e.kind is EventKind.MISSTEP), None),
        state=run.to_dict() if call.state is not None or call.include_state else None,
        routing=context.options.describe(),
        written_values=() if run.pending is None else run.pending.written_values,
        missing_values=() if run.pending is None else run.pending.missing_values)
