"""Prompt layouts the benchmarks compare with the runtime's append-only `PromptLayout`.

- `VolatileFirstLayout` (the cache suite's naive layout) rebuilds every routing prompt with a
  per-call line (call number and current path) in front of the stable text, as a template
  that starts with "step N, at X" would. Consecutive calls then share no prefix beyond a few
  tokens, so a prefix cache can only help within one call (the arguments prompt extends
  that call's routing prompt).
- `JsonProtocolLayout` asks for the paper's answer format, `{"choice": "<option>"}`,
  instead of a bare option name; the constraint suite pairs it with unconstrained generation.
"""

from __future__ import annotations

from stackroute.runtime.messages import Message
from stackroute.runtime.prompt import PromptLayout
from stackroute.runtime.state import RunState
from stackroute.runtime.tree import Node

JSON_ANSWER = 'Answer with one JSON object, {"choice": "<option name>"}, and nothing else.'
_NAME_ANSWER = "Answer with exactly one option name and nothing else."
_MENU_FOOTER = "Answer with one option name."


class VolatileFirstLayout(PromptLayout):
    """The naive layout: volatile text first, so no two routing calls share a prefix."""

    def header(self, state: RunState) -> tuple[Message, ...]:
        path = state.top().node_path if state.stack else ""
        where = path or "the top level"
        volatile = Message("system", f"Routing call {state.num_steps + 1}; you are at {where}.")
        return (volatile, *super().header(state))


class JsonProtocolLayout(PromptLayout):
    """The append-only layout, asking for `{"choice": ...}` answers (the paper's protocol)."""

    def header(self, state: RunState) -> tuple[Message, ...]:
        system, *rest = super().header(state)
        if _NAME_ANSWER not in system.content:  # the runtime's wording changed: fail loudly
            raise RuntimeError("SYSTEM_TEXT no longer holds the answer-format sentence")
        # The system message's own text: menu-first it also lists the root's options.
        return (Message("system", system.content.replace(_NAME_ANSWER, JSON_ANSWER)), *rest)

    def menu_turn(self, node: Node, *, request: str | None = None) -> Message:
        turn = super().menu_turn(node, request=request)
        if not turn.content.endswith(_MENU_FOOTER):
            raise RuntimeError(f"menu turn ends with {turn.content[-60:]!r}, not "
                               f"{_MENU_FOOTER!r}")
        return Message(turn.role, turn.content.removesuffix(_MENU_FOOTER) + JSON_ANSWER)
