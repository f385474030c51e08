"""Run state = (conversation, stack of frames, pending call): serialisable and resumable."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from stackroute.runtime.frames import Frame
from stackroute.runtime.governance import Limits, RunStatus
from stackroute.runtime.messages import Message
from stackroute.runtime.trace import TraceEvent
from stackroute.runtime.usage import Usage

if TYPE_CHECKING:
    from stackroute.runtime.tree import Node

STATE_VERSION = 1


class PendingKind(StrEnum):
    LEAF = "leaf"


@dataclass
class PendingCall:
    """The leaf call the runtime is about to run (or that waits at a confirmation gate).

    `call_id` is the idempotency key: an executor that has already run this id returns the
    recorded result instead of running the handler again.
    """

    kind: PendingKind
    path: str
    arguments: dict[str, Any]
    call_id: str
    frame_id: int
    is_gated: bool = False  # waits for approve/reject
    digest: str = ""
    written_values: tuple[str, ...] = ()  # arguments not taken from the request (Decision's)
    # Required values the request did not hold, asked of the user (`StackMachine.supply`):
    # while any are missing the call waits (the run is paused) and cannot run or be approved.
    missing_values: tuple[str, ...] = ()
    supplied_values: tuple[str, ...] = ()  # the values the user gave for the missing ones

    def __post_init__(self) -> None:
        if not self.digest:
            self.digest = confirmation_digest(call_id=self.call_id, path=self.path,
                                              arguments=self.arguments)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value, "path": self.path, "arguments": self.arguments,
            "call_id": self.call_id, "frame_id": self.frame_id, "is_gated": self.is_gated,
            "digest": self.digest, **self.provenance(),
        }

    @property
    def is_waiting_for_values(self) -> bool:
        return bool(self.missing_values)

    def provenance(self) -> dict[str, list[str]]:
        """Where the values not taken from the request came from, for a trace event or a call
        record: `written_values` (the model), `missing_values` (not yet given),
        `supplied_values` (the user); only those that name some (a call taken whole from
        the request records nothing more)."""
        named = {"written_values": self.written_values, "missing_values": self.missing_values,
                 "supplied_values": self.supplied_values}
        return {key: list(names) for key, names in named.items() if names}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PendingCall:
        return cls(
            kind=PendingKind(data["kind"]), path=data["path"], arguments=dict(data["arguments"]),
            call_id=data["call_id"], frame_id=int(data["frame_id"]),
            is_gated=bool(data["is_gated"]), digest=data["digest"],
            # absent before 2026-12-05
            written_values=tuple(data.get("written_values", ())),
            missing_values=tuple(data.get("missing_values", ())),
            supplied_values=tuple(data.get("supplied_values", ())),
        )


def arguments_digest(path: str, arguments: dict[str, Any]) -> str:
    """A digest of a call's path and arguments: what an idempotency record compares, so a
    call id reused for another call is caught. Not a confirmation: see `confirmation_digest`."""
    canonical = json.dumps([path, arguments], sort_keys=True, separators=(",", ":"),
                           ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def confirmation_digest(*, call_id: str, path: str, arguments: dict[str, Any],
                        leaf: dict[str, Any] | None = None) -> str:
    """The digest a confirmation must quote: it binds the approval to this one call (its call
    id names the run and the call's place in it), its path and arguments, and the leaf's
    definition as the catalog had it (`leaf`: the node's `to_dict()`). The same arguments in
    the next call, another run, or a changed catalog get another digest, so an approval
    cannot be replayed."""
    canonical = json.dumps(["confirm/v2", call_id, path, arguments, leaf], sort_keys=True,
                           separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def leaf_definition(leaf: Node) -> dict[str, Any]:
    """What a confirmation of a call to `leaf` binds besides the call: the leaf as the
    catalog defines it (a changed schema, handler or description is another call)."""
    return {"description": leaf.description, "parameters": leaf.parameters,
            "sensitive": leaf.sensitive, "handler": leaf.handler}


@dataclass
class RunState:
    run_id: str
    catalog: str
    conversation: list[Message]
    limits: Limits
    is_flat: bool = False
    stack: list[Frame] = field(default_factory=list)
    pending: PendingCall | None = None
    status: RunStatus = RunStatus.RUNNING
    num_steps: int = 0
    num_calls: int = 0  # leaf calls started, for idempotency keys
    num_format_failures: int = 0
    next_frame_id: int = 0
    trace: list[TraceEvent] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)  # executed leaf calls, in order
    result: list[dict[str, Any]] | None = None
    usage: Usage = field(default_factory=Usage)
    error: str | None = None

    @property
    def task(self) -> str:
        return next((m.content for m in self.conversation if m.role == "user"), "")

    def top(self) -> Frame:
        return self.stack[-1]

    def frame(self, frame_id: int) -> Frame:
        for f in self.stack:
            if f.frame_id == frame_id:
                return f
        raise KeyError(f"frame {frame_id} is not on the stack")

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "run_id": self.run_id,
            "catalog": self.catalog,
            "conversation": [m.to_dict() for m in self.conversation],
            "limits": self.limits.to_dict(),
            "is_flat": self.is_flat,
            "stack": [f.to_dict() for f in self.stack],
            "pending": None if self.pending is None else self.pending.to_dict(),
            "status": self.status.value,
            "num_steps": self.num_steps,
            "num_calls": self.num_calls,
            "num_format_failures": self.num_format_failures,
            "next_frame_id": self.next_frame_id,
            "trace": [e.to_dict() for e in self.trace],
            "calls": self.calls,
            "result": self.result,
            "usage": self.usage.to_dict(),
            "error": self.error,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunState:
        if data.get("version") != STATE_VERSION:
            raise ValueError(f"state version {data.get('version')!r} is not {STATE_VERSION}")
        pending = data.get("pending")
        return cls(
            run_id=data["run_id"],
            catalog=data["catalog"],
            conversation=[Message.from_dict(m) for m in data["conversation"]],
            limits=Limits.from_dict(data["limits"]),
            is_flat=bool(data.get("is_flat", False)),
            stack=[Frame.from_dict(f) for f in data["stack"]],
            pending=None if pending is None else PendingCall.from_dict(pending),
            status=RunStatus(data["status"]),
            num_steps=int(data["num_steps"]),
            num_calls=int(data["num_calls"]),
            num_format_failures=int(data["num_format_failures"]),
            next_frame_id=int(data["next_frame_id"]),
            trace=[TraceEvent.from_dict(e) for e in data["trace"]],
            calls=list(data["calls"]),
            result=data.get("result"),
            usage=Usage.from_dict(data["usage"]),
            error=data.get("error"),
        )

    @classmethod
    def from_json(cls, text: str) -> RunState:
        return cls.from_dict(json.loads(text))


def scratch_copy(state: RunState) -> RunState:
    """A copy of `state` a predicted transition may change: its own frames (lists copied),
    calls and an empty trace; messages and results are shared, as nothing mutates them."""
    stack = [replace(f, turns=list(f.turns), accumulator=list(f.accumulator),
                     history=list(f.history), tried=list(f.tried),
                     refused=list(f.refused)) for f in state.stack]
    return replace(state, stack=stack, trace=[], calls=list(state.calls))
