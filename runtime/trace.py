"""Trace events: every transition of a run, written as JSONL and printed as a tree."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import IO, Any

from stackroute.runtime.decision import ArgumentsCall


class EventKind(StrEnum):
    START = "start"
    ROUTE = "route"  # a routing call and its decision
    PUSH = "push"  # delegate: a child router's frame is pushed
    LEAF_PENDING = "leaf_pending"  # a leaf call is recorded before it runs (idempotency key)
    LEAF_RESULT = "leaf_result"
    POP_DONE = "pop_done"
    POP_BACK = "pop_back"
    GATE_PAUSE = "gate_pause"
    GATE_APPROVE = "gate_approve"
    GATE_REJECT = "gate_reject"
    VALUES_PAUSE = "values_pause"  # a leaf call waits for required values the request lacked
    VALUES_SUPPLY = "values_supply"  # the user gave them; the call goes on (or to its gate)
    LIMIT = "limit"
    ALERT = "alert"
    MISSTEP = "misstep"  # the model answered outside the menu or gave invalid arguments
    FINISH = "finish"
    CANCEL = "cancel"


class MisstepKind(StrEnum):
    """What a MISSTEP event's answer got wrong (`detail["kind"]`)."""

    MENU = "menu"  # an answer outside the menu
    ARGUMENTS = "arguments"  # a leaf's arguments not a JSON object, or not valid for its schema


@dataclass(frozen=True, kw_only=True)
class TraceEvent:
    seq: int
    kind: EventKind
    frame_id: int | None
    parent_id: int | None
    path: str
    depth: int = 0
    menu: tuple[str, ...] | None = None
    decision: str | None = None
    arguments: Mapping[str, Any] | None = None
    probabilities: Mapping[str, float] | None = None
    usage: Mapping[str, Any] | None = None
    arguments_call: ArgumentsCall | None = None  # a leaf's argument generation (in `usage`)
    error: str | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)
    time_unix: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "seq": self.seq, "kind": self.kind.value, "frame_id": self.frame_id,
            "parent_id": self.parent_id, "path": self.path, "depth": self.depth,
        }
        for key in ("menu", "decision", "arguments", "probabilities", "usage", "error"):
            value = getattr(self, key)
            if value is not None:
                d[key] = list(value) if key == "menu" else value
        if self.arguments_call is not None:
            d["arguments_call"] = self.arguments_call.to_dict()
        if self.detail:
            d["detail"] = dict(self.detail)
        d["time_unix"] = self.time_unix
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TraceEvent:
        menu = data.get("menu")
        return cls(
            seq=int(data["seq"]), kind=EventKind(data["kind"]), frame_id=data.get("frame_id"),
            parent_id=data.get("parent_id"), path=str(data.get("path", "")),
            depth=int(data.get("depth", 0)), menu=None if menu is None else tuple(menu),
            decision=data.get("decision"), arguments=data.get("arguments"),
            probabilities=data.get("probabilities"), usage=data.get("usage"),
            arguments_call=None if data.get("arguments_call") is None
            else ArgumentsCall.from_dict(data["arguments_call"]), error=data.get("error"),
            detail=data.get("detail", {}),
            time_unix=float(data.get("time_unix", 0.0)),
        )

    def comparable(self) -> dict[str, Any]:
        """The event without what legitimately differs between equal runs (time, latency)."""
        d = self.to_dict()
        d.pop("time_unix", None)
        if "usage" in d:
            d["usage"] = {k: v for k, v in d["usage"].items() if k != "latency_ms"}
        if "arguments_call" in d:
            d["arguments_call"]["usage"].pop("latency_ms", None)
        return d


def write_jsonl(events: Iterable[TraceEvent], out: IO[str]) -> None:
    for e in events:
        out.write(json.dumps(e.to_dict(), ensure_ascii=False) + "\n")


def read_jsonl(path: str | Path) -> list[TraceEvent]:
    events = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                if not isinstance(data, dict):
                    raise TypeError(f"expected a JSON object, got {type(data).__name__}")
                events.append(TraceEvent.from_dict(data))
            except (ValueError, KeyError, TypeError) as e:
                raise ValueError(f"{path}:{n}: not a trace event: {e}") from e
    return events


def format_tree(events: Iterable[TraceEvent]) -> list[str]:
    """Lines showing a run as an indented tree: one line per transition, nested by depth."""
    lines = []
    for e in events:
        pad = "  " * e.depth
        if e.kind is EventKind.ROUTE:
            p = (e.probabilities or {}).get(e.decision or "")
            conf = f" p={p:.2f}" if p is not None else ""
            lines.append(f"{pad}? {e.path or '<root>'} -> {e.decision}{conf}")
        elif e.kind is EventKind.PUSH:
            lines.append(f"{pad}> enter {e.path}")
        elif e.kind is EventKind.LEAF_RESULT:
            status = "error: " + e.error if e.error else json.dumps(e.detail.get("result"))[:80]
            leaf = e.detail.get("leaf", e.path)
            lines.append(f"{pad}  * {leaf}({json.dumps(e.arguments)}) = {status}")
        elif e.kind in (EventKind.POP_DONE, EventKind.POP_BACK):
            lines.append(f"{pad}< {e.kind.value.split('_')[1]} {e.path or '<root>'}")
        elif e.kind is EventKind.LEAF_PENDING:
            continue
        else:
            msg = e.error or json.dumps(dict(e.detail)) if (e.error or e.detail) else ""
            lines.append(f"{pad}! {e.kind.value} {e.path or '<root>'} {msg}".rstrip())
    return lines
