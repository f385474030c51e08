"""Frames: one active skill each, on an explicit LIFO stack."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stackroute.runtime.messages import Message


@dataclass(frozen=True)
class RefusedArguments:
    """Arguments a leaf's schema refused in this frame: the leaf, the arguments, and the
    top-level properties the schema's problems lay in (empty: the object as a whole, e.g. an
    extra property or an `anyOf` over the object). The router reads them so that its next
    answer for the leaf is not the same refused call."""

    leaf: str
    arguments: dict[str, Any]
    properties: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"leaf": self.leaf, "arguments": self.arguments,
                "properties": list(self.properties)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RefusedArguments:
        return cls(str(data["leaf"]), dict(data["arguments"]),
                   tuple(str(p) for p in data["properties"]))


@dataclass
class Frame:
    """One active router node on the stack.

    `turns` is this frame's block of the prompt (its menu, the answers given here and the
    results handed back), so the prompt of any call is the header plus the turns of the
    frames on the stack: popping a frame returns to the parent's exact prefix.
    `accumulator` holds the outputs of this frame's children; it is the frame's output when
    the frame finishes with DONE.
    """

    frame_id: int
    node_path: str
    parent_id: int | None
    turns: list[Message] = field(default_factory=list)
    accumulator: list[dict[str, Any]] = field(default_factory=list)
    num_iterations: int = 0
    history: list[str] = field(default_factory=list)  # every choice made in this frame
    tried: list[str] = field(default_factory=list)  # branches abandoned with BACK
    is_alerted: bool = False  # a branch-switch alert was raised here already
    # The options this frame's opening turn shows while its menu is shortlisted (None: the
    # full menu, from the start or since the model answered OTHER).
    shortlist: tuple[str, ...] | None = None
    refused: list[RefusedArguments] = field(default_factory=list)

    @property
    def output(self) -> list[dict[str, Any]]:
        return self.accumulator

    def to_dict(self) -> dict[str, Any]:
        return {
            "frame_id": self.frame_id,
            "node_path": self.node_path,
            "parent_id": self.parent_id,
            "turns": [m.to_dict() for m in self.turns],
            "accumulator": self.accumulator,
            "num_iterations": self.num_iterations,
            "history": self.history,
            "tried": self.tried,
            "is_alerted": self.is_alerted,
            "shortlist": None if self.shortlist is None else list(self.shortlist),
            "refused": [r.to_dict() for r in self.refused],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Frame:
        return cls(
            frame_id=int(data["frame_id"]),
            node_path=str(data["node_path"]),
            parent_id=None if data["parent_id"] is None else int(data["parent_id"]),
            turns=[Message.from_dict(m) for m in data["turns"]],
            accumulator=list(data["accumulator"]),
            num_iterations=int(data["num_iterations"]),
            history=list(data["history"]),
            tried=list(data["tried"]),
            is_alerted=bool(data["is_alerted"]),
            shortlist=None if data.get("shortlist") is None
            else tuple(str(c) for c in data["shortlist"]),
            refused=[RefusedArguments.from_dict(r) for r in data.get("refused") or ()],
        )
