"""A router's answer to one menu."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from stackroute.runtime.usage import Usage


@dataclass(frozen=True, kw_only=True)
class ArgumentsCall:
    """How a leaf's arguments were generated: the generation's own usage (a part of the
    decision's), why it ended ("stop", "length"), and the fallback taken (e.g.
    "required_only"; None: the first answer was kept)."""

    usage: Usage
    finish_reason: str
    fallback: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"usage": self.usage.to_dict(), "finish_reason": self.finish_reason}
        if self.fallback is not None:
            d["fallback"] = self.fallback
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ArgumentsCall:
        return cls(usage=Usage.from_dict(dict(data["usage"])),
                   finish_reason=str(data["finish_reason"]), fallback=data.get("fallback"))


@dataclass(frozen=True, kw_only=True)
class Decision:
    """One menu entry, and for a leaf its arguments.

    `probabilities` is the router's distribution over the whole menu when it has one (engines
    with constrained choice always do). `raw_text` holds what an unconstrained router produced,
    so a format failure (an answer outside the menu) can be recorded as the model's misstep.

    For a leaf, `arguments_text` is the generated text exactly as the model wrote it (the
    machine puts it in the conversation) and `arguments` its parse: None when the text is
    not a JSON object (cut off at the token cap, or malformed), which the machine records as
    an arguments misstep. `arguments_call` says how they were generated, its usage a part of
    `usage` (None: the router did not measure it apart). `written_values` names the required
    properties the router wrote under the schema instead of taking from the request (it held
    no value for them): not the user's words (empty where the router does not tell them
    apart). `missing_values` names the required properties the request held no value for and
    the router left out of `arguments` to be asked of the user (the `ask` missing-values
    option): the machine pauses the call until they are supplied.
    """

    choice: str
    arguments: Mapping[str, Any] | None = None
    probabilities: Mapping[str, float] | None = None
    margin: float | None = None  # log-prob gap between the top two options, for near ties
    usage: Usage = field(default_factory=Usage)
    raw_text: str | None = None
    arguments_text: str | None = None
    arguments_call: ArgumentsCall | None = None
    written_values: tuple[str, ...] = ()
    missing_values: tuple[str, ...] = ()
    detail: Mapping[str, Any] = field(default_factory=dict)

    @property
    def arguments_usage(self) -> Usage | None:
        """The argument generation's own usage (a part of `usage`), when measured apart."""
        return None if self.arguments_call is None else self.arguments_call.usage
