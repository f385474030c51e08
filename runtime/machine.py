"""The stack machine: frame = stack.top() → decision = router.route(…) → state.apply(decision).

Each `step` performs exactly one transition and records it in the trace, so a caller (the
service) can persist the state after every step and resume from any of them.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

from stackroute.runtime.decision import Decision
from stackroute.runtime.errors import StateError
from stackroute.runtime.frames import Frame, RefusedArguments
from stackroute.runtime.governance import LimitKind, Limits, RunStatus, count_branch_switches
from stackroute.runtime.handlers import Executor, LocalExecutor
from stackroute.runtime.menu import CompletionState, Menu, frame_menu
from stackroute.runtime.messages import Message
from stackroute.runtime.missing_values import partial_schema, unknown_missing
from stackroute.runtime.paused_calls import PausedCalls
from stackroute.runtime.prompt import PromptLayout, answer
from stackroute.runtime.router import Router, RoutingRequest, Shortlister
from stackroute.runtime.schemas import argument_problems, is_json_object
from stackroute.runtime.state import (
    PendingCall,
    PendingKind,
    RunState,
    confirmation_digest,
    leaf_definition,
    scratch_copy,
)
from stackroute.runtime.trace import EventKind, MisstepKind, TraceEvent
from stackroute.runtime.tree import CapabilityTree, Node


class StackMachine(PausedCalls):
    def __init__(
        self,
        tree: CapabilityTree,
        router: Router,
        *,
        executor: Executor | None = None,
        layout: PromptLayout | None = None,
        limits: Limits | None = None,
        clock: Callable[[], float] = time.time,
        shortlister: Shortlister | None = None,
    ) -> None:
        self.tree = tree
        self.shortlister = shortlister  # None: every frame opens with its full menu
        self.router = router
        self.executor = executor or LocalExecutor()
        self.layout = layout or PromptLayout(tree)
        self.limits = limits or Limits()
        self.clock = clock

    # -- lifecycle -------------------------------------------------------------------------
    def start(self, task: str, *, run_id: str | None = None, is_flat: bool = False,
              at: str = "") -> RunState:
        """A new run at the root, or at router `at` as if the model had chosen each router on
        the way there (for a single routing decision at an inner node)."""
        state = RunState(
            run_id=run_id or uuid.uuid4().hex, catalog=self.tree.name,
            conversation=[Message("user", task)], limits=self.limits, is_flat=is_flat,
        )
        target = self.tree.get(at)
        if target is None:  # the user's bad input (`route --node`), not a KeyError
            raise StateError(f"no node at path {at!r} in catalog {self.tree.name!r}")
        if target.is_leaf:
            raise StateError(f"{at!r} is a leaf; a run can start only at a router")
        self._push(state, self.tree.root, may_shortlist=not target.path)
        for depth in range(1, target.depth + 1):
            frame = state.top()
            frame.turns.append(answer(target.path[depth - 1]))
            frame.history.append(target.path[depth - 1])
            self._push(state, self.tree.node(target.path[:depth]), parent=frame,
                       may_shortlist=depth == target.depth)
        return state

    def run(self, state: RunState) -> RunState:
        """Step until the run finishes or pauses at a confirmation gate."""
        while state.status is RunStatus.RUNNING:
            self.step(state)
        return state

    def step(self, state: RunState, request: RoutingRequest | None = None) -> None:
        """One transition. `request`: this step's routing request when the caller made it
        already (`request_for`, to check its prompt first), so it is not rendered twice."""
        if state.status is not RunStatus.RUNNING:
            raise StateError(f"run {state.run_id} is {state.status.value}, not running")
        if state.pending is not None:
            self._execute_pending(state)
            return
        frame = state.top()
        limit = _limit_reached(state, frame)
        if limit is LimitKind.MAX_STEPS:
            self._record(state, EventKind.LIMIT, frame, detail={
                "limit": LimitKind.MAX_STEPS, "value": state.limits.max_steps})
            self._finish(state, RunStatus.LIMIT)
            return
        if limit is LimitKind.MAX_ITERATIONS:
            self._record(state, EventKind.LIMIT, frame, detail={
                "limit": LimitKind.MAX_ITERATIONS, "value": state.limits.max_iterations})
            if frame.accumulator or len(state.stack) == 1:
                self._pop_done(state, frame, status=RunStatus.LIMIT)
            else:  # nothing done here: an empty result is "wrong branch", not output
                self._pop_back(state, frame)
            return
        if request is None:
            request = self.request_for(state)
        elif request.run_id != state.run_id or request.step != state.num_steps:
            raise StateError(f"the request given is for step {request.step} of run "
                             f"{request.run_id}, not step {state.num_steps} of {state.run_id}")
        node, menu = request.node, request.menu
        decision = self.router.route(request)
        state.num_steps += 1
        frame.num_iterations += 1
        state.usage = state.usage + decision.usage
        self._record(state, EventKind.ROUTE, frame, menu=menu.options, decision=decision.choice,
                     arguments=decision.arguments, probabilities=decision.probabilities,
                     usage=decision.usage.to_dict(), detail=dict(decision.detail),
                     arguments_call=decision.arguments_call)
        self._apply(state, frame, node, menu, decision)

    # -- requests --------------------------------------------------------------------------
    def request_for(self, state: RunState) -> RoutingRequest:
        """The routing request for the top frame as the state stands (its prompt rendered)."""
        frame = state.top()
        steps = state.num_steps
        return RoutingRequest(
            run_id=state.run_id, step=steps, depth=len(state.stack) - 1,
            task=state.task, node=self.tree.node(frame.node_path),
            menu=self.menu_for(state, frame), prompt=self.layout.routing_prompt(state),
            layout=self.layout, calls=tuple(c["path"] for c in state.calls),
            refused=tuple(frame.refused), after_done=lambda: self._after_done(state, steps),
            shortlister=self.shortlister)

    def _after_done(self, state: RunState, steps: int) -> RoutingRequest | None:
        """The request `step` makes next if the current one is answered DONE, computed on a
        scratch copy of the state with the same transition `step` applies (the real state is
        untouched); None where DONE is not on the menu, finishes the run, or the next step is
        a limit rather than a routing call. Only valid until the run moves on."""
        if state.num_steps != steps:
            raise StateError(f"run {state.run_id} has moved on from step {steps}; the "
                             "request's after_done no longer describes it")
        scratch = scratch_copy(state)
        frame = scratch.top()
        if len(scratch.stack) == 1 or CompletionState.DONE not in self.menu_for(scratch, frame):
            return None
        scratch.num_steps += 1
        frame.num_iterations += 1
        frame.history.append(CompletionState.DONE)
        self._hand_up(scratch, frame)
        if _limit_reached(scratch, scratch.top()) is not None:
            return None
        return self.request_for(scratch)

    # -- menus -----------------------------------------------------------------------------
    def menu_for(self, state: RunState, frame: Frame) -> Menu:
        """What `frame` may answer now (`frame_menu`: children not abandoned here, only those
        shown while it is shortlisted, then the completion states that mean something)."""
        node = self.tree.node(frame.node_path)
        return frame_menu(path=node.path_str, child_names=node.child_names, depth=node.depth,
                          tried=tuple(frame.tried) if state.limits.exclude_tried else (),
                          has_output=bool(frame.accumulator), shortlist=frame.shortlist)

    # -- transitions -----------------------------------------------------------------------
    def _apply(self, state: RunState, frame: Frame, node: Node, menu: Menu,
               decision: Decision) -> None:
        choice = decision.choice
        if choice not in menu:
            self._misstep(state, frame, answer_text=decision.raw_text or choice,
                          problem=f"{choice!r} is not one of {list(menu.options)}",
                          kind=MisstepKind.MENU)
            return
        frame.history.append(choice)
        if choice == CompletionState.DONE:
            self._pop_done(state, frame, status=RunStatus.DONE)
        elif choice == CompletionState.BACK:
            self._pop_back(state, frame)
        elif choice == CompletionState.OTHER:  # the shortlist missed: the full menu follows
            frame.shortlist = None
            frame.turns += [answer(choice), self.layout.full_menu_turn(node)]
        else:
            child = node.child(choice)
            if child is None:  # the menu only holds children; anything else is our bug
                raise RuntimeError(f"menu option {choice!r} is not a child of {node.path_str}")
            if child.is_leaf:
                self._leaf_decided(state, frame, child, decision)
            else:
                self._delegate(state, frame, child)

    def _delegate(self, state: RunState, frame: Frame, child: Node) -> None:
        frame.turns.append(answer(child.name))
        if len(state.stack) >= state.limits.max_depth:
            frame.tried.append(child.name)
            frame.turns.append(self.layout.child_back_turn(child, self.menu_for(state, frame),
                                                           "too deep to enter"))
            self._record(state, EventKind.LIMIT, frame, detail={
                "limit": LimitKind.MAX_DEPTH, "value": state.limits.max_depth,
                "child": child.name})
            return
        self._push(state, child, parent=frame)
        node = self.tree.node(frame.node_path)
        routers = {c.name for c in node.children if not c.is_leaf}
        switches = count_branch_switches(frame.history, routers)
        if switches >= state.limits.max_branch_switches and not frame.is_alerted:
            frame.is_alerted = True
            self._record(state, EventKind.ALERT, frame, detail={
                "alert": "branch_switching", "switches": switches,
                "history": list(frame.history)})

    def _push(self, state: RunState, node: Node, parent: Frame | None = None, *,
              may_shortlist: bool = True) -> None:
        """Open a frame at `node`, shortlisted where the shortlister says (OTHER appends the
        full menu later: the prompt stays append-only)."""
        frame = Frame(frame_id=state.next_frame_id, node_path=node.path_str,
                      parent_id=None if parent is None else parent.frame_id)
        request = state.task if parent is None else None
        shortlist = self.shortlister.shortlist(state.task, tuple(c["path"] for c in state.calls),
                                               node, self.menu_for(state, frame)) \
            if self.shortlister is not None and may_shortlist else None
        frame.shortlist = None if shortlist is None else shortlist.children
        frame.turns.append(self.layout.opening_turn(node, self.menu_for(state, frame),
                                                    shortlist, request=request))
        state.next_frame_id += 1
        state.stack.append(frame)
        detail: dict[str, Any] = {"task": state.task} if parent is None else {}
        if shortlist is not None:
            detail["shortlist"] = {"options": list(shortlist.children), "margin": shortlist.margin}
        self._record(state, EventKind.START if parent is None else EventKind.PUSH, frame,
                     detail=detail)

    def _leaf_decided(self, state: RunState, frame: Frame, leaf: Node,
                      decision: Decision) -> None:
        arguments = dict(decision.arguments or {})
        arguments_text = decision.arguments_text
        if arguments_text is None:  # a router that hands over parsed arguments only
            arguments_text = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
        turns = [answer(leaf.name), self.layout.arguments_request(leaf, state.task),
                 Message("assistant", arguments_text)]
        if not is_json_object(arguments_text):
            # Cut off, or not JSON at all: a misstep as it stands. Never validated against
            # the schema: a catalog's pattern applied to arbitrary model text can stall.
            frame.turns.extend(turns[:2])
            self._misstep(state, frame, answer_text=arguments_text,
                          problem=f"arguments of {leaf.name} are not a JSON object (cut off "
                                  "or malformed)", kind=MisstepKind.ARGUMENTS)
            return
        missing = decision.missing_values
        errors = [f"asks for {name}, which is not a required property or was given"
                  for name in unknown_missing(leaf.parameters, missing) + [
                      n for n in missing if n in arguments]]
        if not errors:
            problems = argument_problems(partial_schema(leaf.parameters, missing), arguments)
            errors = [str(p) for p in problems]
            if problems:
                named = {p.property for p in problems}
                frame.refused.append(RefusedArguments(
                    leaf.path_str, arguments, () if None in named
                    else tuple(n for n in arguments if n in named)))
        if errors:
            frame.turns.extend(turns[:2])
            self._misstep(state, frame, answer_text=arguments_text,
                          problem=f"arguments of {leaf.name} do not match its schema: "
                                  + "; ".join(errors), kind=MisstepKind.ARGUMENTS)
            return
        frame.turns.extend(turns)
        call_id = f"{state.run_id}:{state.num_calls}"
        state.pending = PendingCall(kind=PendingKind.LEAF, path=leaf.path_str,
                                    arguments=arguments, call_id=call_id,
                                    frame_id=frame.frame_id, is_gated=leaf.sensitive,
                                    digest=confirmation_digest(
                                        call_id=call_id, path=leaf.path_str,
                                        arguments=arguments, leaf=leaf_definition(leaf)),
                                    written_values=decision.written_values,
                                    missing_values=missing)
        state.num_calls += 1
        self._record(state, EventKind.LEAF_PENDING, frame, arguments=arguments, detail={
            "leaf": leaf.path_str, "call_id": state.pending.call_id,
            "digest": state.pending.digest, **state.pending.provenance()})
        if missing:
            state.status = RunStatus.PAUSED
            self._record(state, EventKind.VALUES_PAUSE, frame, arguments=arguments, detail={
                "leaf": leaf.path_str, "call_id": state.pending.call_id,
                "digest": state.pending.digest, "missing_values": list(missing)})
        elif leaf.sensitive:
            state.status = RunStatus.PAUSED
            self._record(state, EventKind.GATE_PAUSE, frame, arguments=arguments, detail={
                "leaf": leaf.path_str, "call_id": state.pending.call_id,
                "digest": state.pending.digest})

    def _execute_pending(self, state: RunState) -> None:
        pending = state.pending
        assert pending is not None
        if pending.is_waiting_for_values:
            raise StateError(f"call {pending.call_id} waits for values: "
                             + ", ".join(pending.missing_values))
        if pending.is_gated:
            raise StateError(f"call {pending.call_id} waits for approval")
        frame = state.frame(pending.frame_id)
        leaf = self.tree.node(pending.path)
        outcome = self.executor.execute(leaf, pending.arguments, pending.call_id)
        result, error = outcome.result, outcome.error
        try:  # keep what a resumed run reads back: tuples become lists, sets and objects str
            result = json.loads(json.dumps(result, ensure_ascii=False, default=str))
        except (ValueError, RecursionError) as e:
            result, error = None, error or f"result is not JSON-serialisable: {e}"
        entry: dict[str, Any] = {"path": self._report_path(leaf), "arguments": pending.arguments}
        if error is None:
            entry["result"] = result
        else:
            entry["error"] = error
        frame.accumulator.append(entry)
        frame.turns.append(self.layout.result_turn(leaf, self.menu_for(state, frame),
                                                   result=result, error=error,
                                                   max_chars=state.limits.max_result_chars))
        state.calls.append({**entry, "call_id": pending.call_id, **pending.provenance()})
        state.pending = None
        self._record(state, EventKind.LEAF_RESULT, frame, arguments=pending.arguments,
                     error=error, detail={"leaf": leaf.path_str, "call_id": pending.call_id,
                                          "result": result, "is_replayed": outcome.is_replayed})

    def _pop_done(self, state: RunState, frame: Frame, *, status: RunStatus) -> None:
        if len(state.stack) == 1:
            state.result = frame.accumulator
            self._finish(state, status)
            return
        self._hand_up(state, frame)
        self._record(state, EventKind.POP_DONE, frame, detail={"output": frame.accumulator})

    def _hand_up(self, state: RunState, frame: Frame) -> None:
        """Pop finished `frame` and hand its output to the parent (accumulator and turn)."""
        state.stack.pop()
        parent = state.top()
        child = self.tree.node(frame.node_path)
        parent.accumulator.append({"path": frame.node_path, "output": frame.accumulator})
        parent.turns.append(self.layout.child_done_turn(child, self.menu_for(state, parent),
                                                        frame.accumulator,
                                                        state.limits.max_result_chars))

    def _pop_back(self, state: RunState, frame: Frame) -> None:
        state.stack.pop()
        parent = state.top()
        child = self.tree.node(frame.node_path)
        parent.tried.append(child.name)
        parent.turns.append(self.layout.child_back_turn(child, self.menu_for(state, parent)))
        self._record(state, EventKind.POP_BACK, frame)

    def _misstep(self, state: RunState, frame: Frame, *, answer_text: str, problem: str,
                 kind: MisstepKind) -> None:
        state.num_format_failures += 1
        frame.turns.extend([Message("assistant", answer_text),
                            self.layout.invalid_answer_turn(problem,
                                                            self.menu_for(state, frame))])
        self._record(state, EventKind.MISSTEP, frame, error=problem, detail={"kind": kind})

    def _finish(self, state: RunState, status: RunStatus) -> None:
        state.status = status
        if state.result is None:  # a limit stops the run; what the root gathered still counts
            state.result = state.stack[0].accumulator
        self._record(state, EventKind.FINISH, state.top(), detail={
            "status": status.value, "num_calls": len(state.calls)})

    def _report_path(self, leaf: Node) -> str:
        tree_path = leaf.metadata.get("tree_path")
        return tree_path if isinstance(tree_path, str) else leaf.path_str

    def _record(self, state: RunState, kind: EventKind, frame: Frame, **fields: Any) -> None:
        depth = next((i for i, f in enumerate(state.stack) if f.frame_id == frame.frame_id),
                     len(state.stack))
        state.trace.append(TraceEvent(
            seq=len(state.trace), kind=kind, frame_id=frame.frame_id,
            parent_id=frame.parent_id, path=frame.node_path, depth=depth,
            time_unix=self.clock(), **fields))


def _limit_reached(state: RunState, frame: Frame) -> LimitKind | None:
    return state.limits.reached(num_steps=state.num_steps, num_iterations=frame.num_iterations)

