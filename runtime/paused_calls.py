"""What a user does with a paused run: approve or reject the call at its gate, supply the
values a call waits for, or cancel the run. `StackMachine` inherits these; they change the
state the same way its steps do (one trace event each) and never call the router."""

from __future__ import annotations

import hmac
import json
from abc import ABC, abstractmethod
from typing import Any

from stackroute.runtime.errors import StateError
from stackroute.runtime.frames import Frame
from stackroute.runtime.governance import RunStatus
from stackroute.runtime.menu import Menu
from stackroute.runtime.messages import Message
from stackroute.runtime.missing_values import supplied_arguments
from stackroute.runtime.prompt import PromptLayout
from stackroute.runtime.state import PendingCall, RunState, confirmation_digest, leaf_definition
from stackroute.runtime.trace import EventKind
from stackroute.runtime.tree import CapabilityTree, Node


class PausedCalls(ABC):
    tree: CapabilityTree
    layout: PromptLayout

    @abstractmethod
    def menu_for(self, state: RunState, frame: Frame) -> Menu: ...

    @abstractmethod
    def _report_path(self, leaf: Node) -> str: ...

    @abstractmethod
    def _record(self, state: RunState, kind: EventKind, frame: Frame, **fields: Any) -> None: ...

    def approve(self, state: RunState, digest: str) -> None:
        """Let the gated call run; `digest` must name the exact call shown to the approver."""
        pending = self._gated(state, digest)
        pending.is_gated = False
        state.status = RunStatus.RUNNING
        self._record(state, EventKind.GATE_APPROVE, state.frame(pending.frame_id),
                     arguments=pending.arguments, detail={"call_id": pending.call_id})

    def supply(self, state: RunState, digest: str, values: Any) -> None:
        """Give the call waiting for values (`PendingCall.missing_values`) exactly those; it
        then runs on its next step, or waits at its gate (a sensitive leaf) under a new
        digest. `digest` names the call as shown when the values were asked. Wrong values
        raise InputError and change nothing: the call still waits."""
        pending = self._paused(state, digest, waiting_for_values=True)
        leaf = self.tree.node(pending.path)
        arguments = supplied_arguments(leaf.parameters, pending.arguments,
                                       pending.missing_values, values, leaf=leaf.path_str)
        frame = state.frame(pending.frame_id)
        if frame.turns and frame.turns[-1].role == "assistant":  # the arguments as called
            frame.turns[-1] = Message("assistant", json.dumps(
                arguments, ensure_ascii=False, separators=(",", ":")))
        pending.supplied_values, pending.missing_values = pending.missing_values, ()
        pending.arguments = arguments
        pending.digest = confirmation_digest(call_id=pending.call_id, path=pending.path,
                                             arguments=arguments, leaf=leaf_definition(leaf))
        self._record(state, EventKind.VALUES_SUPPLY, frame, arguments=arguments, detail={
            "leaf": leaf.path_str, "call_id": pending.call_id, "digest": pending.digest,
            "supplied_values": list(pending.supplied_values)})
        if pending.is_gated:
            self._record(state, EventKind.GATE_PAUSE, frame, arguments=arguments, detail={
                "leaf": leaf.path_str, "call_id": pending.call_id, "digest": pending.digest})
        else:
            state.status = RunStatus.RUNNING

    def reject(self, state: RunState, digest: str) -> None:
        """Decline the paused call (at its gate, or waiting for values): the model is told
        and routes on."""
        pending = self._paused(state, digest, waiting_for_values=None)
        frame = state.frame(pending.frame_id)
        leaf = self.tree.node(pending.path)
        state.pending = None
        state.status = RunStatus.RUNNING
        frame.accumulator.append({"path": self._report_path(leaf), "arguments": pending.arguments,
                                  "rejected": True})
        frame.turns.append(self.layout.rejected_turn(leaf, self.menu_for(state, frame)))
        self._record(state, EventKind.GATE_REJECT, frame, arguments=pending.arguments,
                     detail={"call_id": pending.call_id})

    def cancel(self, state: RunState, reason: str = "cancelled by the user") -> None:
        if state.status.is_final:
            raise StateError(f"run {state.run_id} is already {state.status.value}")
        state.pending = None
        self._record(state, EventKind.CANCEL, state.top(), detail={"reason": reason})
        state.status = RunStatus.CANCELLED

    def _gated(self, state: RunState, digest: str) -> PendingCall:
        return self._paused(state, digest, waiting_for_values=False)

    def _paused(self, state: RunState, digest: str, *,
                waiting_for_values: bool | None) -> PendingCall:
        """The paused call `digest` names: at its gate (`waiting_for_values` False), waiting
        for values (True), or either (None)."""
        pending = state.pending
        if state.status is not RunStatus.PAUSED or pending is None or not (
                pending.is_gated or pending.is_waiting_for_values):
            raise StateError(f"run {state.run_id} is {state.status.value}, not waiting at a "
                             "confirmation gate or for values")
        if waiting_for_values is not None and \
                pending.is_waiting_for_values is not waiting_for_values:
            raise StateError(
                f"call {pending.call_id} ({pending.path}) waits for values: "
                f"{', '.join(pending.missing_values)}; supply them (or reject the call)"
                if pending.is_waiting_for_values else
                f"call {pending.call_id} ({pending.path}) waits at its confirmation gate, "
                "not for values: approve or reject it")
        if not hmac.compare_digest(digest.encode(), pending.digest.encode()):
            # Never the expected digest: an error message must not hand out the approval.
            raise StateError(f"confirmation is for another call: the digest given does not "
                             f"match call {pending.call_id} ({pending.path}); read the "
                             "pending call again and confirm what it shows")
        return pending
