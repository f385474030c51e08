"""The prompt layout: append-only, so consecutive routing calls share the longest prefix.

A routing call's prompt is the header followed by the turns of every frame on the stack, in
stack order. Each transition only appends to the top frame's turns or pushes a new frame, so
call N+1's prompt extends call N's; popping a frame drops its turns and appends the result to
the parent, so the prompt returns to the parent's exact prefix. Nothing volatile (ids, times,
counters) is ever written into a prompt.

Across requests, `PromptOrder.MENU_FIRST` puts the root's menu in the header (the system
message), before the request: everything up to the request is then the same for every request
on a catalog, so an engine's prefix cache computes the root menu's KV once per catalog and
model. `PromptOrder.REQUEST_FIRST` (the layout before issue 29) opens the root frame's turn
with the request and lists the root's options after it, so only the system text is shared.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from stackroute.runtime.menu import CompletionState, Menu, Shortlist
from stackroute.runtime.messages import Message
from stackroute.runtime.state import RunState
from stackroute.runtime.tree import CapabilityTree, Node

SYSTEM_TEXT = (
    "You route a user's request through a tree of capabilities. At each step you see the "
    "options of one level. Answer with exactly one option name and nothing else. Choose a "
    "branch to open it, a tool to call it, DONE when the request is handled at this level "
    "(or nothing here applies at the top level), BACK when nothing at this level fits."
)
STATE_HELP = {
    CompletionState.DONE: "the request is handled at this level; return",
    CompletionState.BACK: "nothing here fits the request; go back up",
    CompletionState.OTHER: "none of these; show every option here",
}
ROOT_DONE_HELP = "the request is fully handled, or nothing here applies"
MENU_FOOTER = "Answer with one option name."


class PromptOrder(StrEnum):
    """Where the root's menu sits relative to the request (see the module docstring)."""

    REQUEST_FIRST = "request-first"  # system, then "Request: …" + the root's options
    MENU_FIRST = "menu-first"  # system + the root's options, then "Request: …"


@dataclass(frozen=True, kw_only=True)
class PromptStyle:
    show_schemas: bool = False  # list each leaf's full JSON schema in the menu (flat baseline)
    max_description_chars: int = 300
    # Menu-first routes as request-first does and prefills a fraction of it per request
    # (Seal-Tools: 912-1,685 vs 5,269-6,042 tokens; bench/results/2026-12-03-cpu-shared-prompt).
    order: PromptOrder = PromptOrder.MENU_FIRST


@dataclass(frozen=True)
class Prompt:
    """Messages ending with a user turn; the engine opens the assistant turn after them."""

    messages: tuple[Message, ...]

    def extend(self, *messages: Message) -> Prompt:
        return Prompt(self.messages + messages)

    def is_prefix_of(self, other: Prompt) -> bool:
        return other.messages[: len(self.messages)] == self.messages

    @property
    def num_chars(self) -> int:
        return sum(len(m.content) for m in self.messages)


class PromptLayout:
    def __init__(self, tree: CapabilityTree, style: PromptStyle | None = None) -> None:
        self.tree = tree
        self.style = style or PromptStyle()

    def header(self, state: RunState) -> tuple[Message, ...]:
        """What precedes the request: the system text (with the root's options where the menu
        comes first). The request opens the root frame's first turn, so roles alternate (some
        chat templates reject two user turns in a row). Identical for every request on a
        catalog: `shared_prefix` is this without a run."""
        return self.shared_prefix()

    def shared_prefix(self) -> tuple[Message, ...]:
        """The messages every request's prompt on this catalog starts with."""
        if self.style.order is PromptOrder.MENU_FIRST:
            return (Message("system", f"{SYSTEM_TEXT}\n\n{self.menu_listing(self.tree.root)}"),)
        return (Message("system", SYSTEM_TEXT),)

    def routing_prompt(self, state: RunState) -> Prompt:
        turns = [m for frame in state.stack for m in frame.turns]
        return Prompt(self.header(state) + tuple(turns))

    def arguments_prompt(self, state: RunState, leaf: Node) -> Prompt:
        return self.routing_prompt(state).extend(answer(leaf.name),
                                                  self.arguments_request(leaf, state.task))

    def menu_turn(self, node: Node, *, request: str | None = None) -> Message:
        """The opening turn of a frame: where it is and every option, once per frame (the
        root's also carries the request). With the menu first, the root's turn with a request
        holds only the request: its options are in the header. Without a request it is the
        full listing in either order (what `menu_fit` counts against the context)."""
        is_root = node.depth == 0
        if is_root and request is not None and self.style.order is PromptOrder.MENU_FIRST:
            return Message("user", f"Request: {request}\n\nYou are at the top level. "
                                   f"{MENU_FOOTER}")
        lead = [f"Request: {request}\n"] if request is not None else []
        return Message("user", "\n".join([*lead, self.menu_listing(node), MENU_FOOTER]))

    def opening_turn(self, node: Node, menu: Menu, shortlist: Shortlist | None, *,
                     request: str | None = None) -> Message:
        """A frame's first turn: its menu, or its shortlist where it has one (`menu`: the
        frame's menu as it opens)."""
        if shortlist is None:
            return self.menu_turn(node, request=request)
        return self.shortlist_turn(node, shortlist, menu, request=request)

    def shortlist_turn(self, node: Node, shortlist: Shortlist, menu: Menu, *,
                       request: str | None = None) -> Message:
        """The opening turn of a shortlisted frame: where it is, the options shown (with their
        descriptions) and the states on `menu` (OTHER first, which opens the full menu)."""
        lead = [f"Request: {request}\n"] if request is not None else []
        lines = [self._where(node), "Likely options:"]
        lines += [self._option_line(c) for c in node.children if c.name in shortlist.children]
        lines += [f"- {s.value}: {_state_help(node, s)}" for s in menu.states]
        return Message("user", "\n".join([*lead, *lines, MENU_FOOTER]))

    def full_menu_turn(self, node: Node) -> Message:
        """What follows OTHER on a shortlisted frame: the full menu (the root's, menu-first,
        is in the header already, so the turn points there)."""
        if node.depth == 0 and self.style.order is PromptOrder.MENU_FIRST:
            return Message("user", f"Every option at the top level is listed above. "
                                   f"{MENU_FOOTER}")
        return self.menu_turn(node)

    def _where(self, node: Node) -> str:
        if node.depth == 0:
            return "You are at the top level."
        return f"You are at {node.path_str}." + (f" {self._clip(node.description)}"
                                                 if node.description else "")

    def menu_listing(self, node: Node) -> str:
        """Where a menu is and its options, one line each, completion states last."""
        is_root = node.depth == 0
        lines = [self._where(node), "Options:"]
        for child in node.children:
            lines.append(self._option_line(child))
        lines.append(f"- DONE: {_state_help(node, CompletionState.DONE)}")
        if not is_root:
            lines.append(f"- BACK: {STATE_HELP[CompletionState.BACK]}")
        return "\n".join(lines)

    def arguments_request(self, leaf: Node, request: str) -> Message:
        """The ask for a leaf's arguments, as the run's transcript keeps it. The request is
        quoted again last, right before the answer: SmolLM2-135M copied the values ("Send 500
        dollars to Asha" → Asha, 500) in 3 of 3 trials this way and in 0 of 3 when the request
        was only at the top of the prompt (it made up "John", 10.5)."""
        schema = json.dumps(leaf.parameters or {"type": "object", "properties": {}},
                            ensure_ascii=False, separators=(",", ":"))
        quoted = json.dumps(request, ensure_ascii=False)
        return Message(
            "user",
            f"Schema of {leaf.name}'s arguments: {schema}\nRequest: {quoted}\nWrite the JSON "
            "arguments, copying the values from the request.",
        )

    # Each turn below ends by naming the completion state the next menu really offers.
    def result_turn(self, leaf: Node, menu: Menu, *, result: Any = None,
                    error: str | None = None, max_chars: int) -> Message:
        if error is not None:
            body = f"{leaf.name} failed: {error}"
        else:
            body = f"{leaf.name} returned: {_clip_json(result, max_chars)}"
        return Message("user", f"{body}\n{next_hint(menu)}")

    def rejected_turn(self, leaf: Node, menu: Menu) -> Message:
        return Message("user", f"The user rejected {leaf.name}; it was not run.\n"
                               f"{next_hint(menu)}")

    def child_done_turn(self, child: Node, menu: Menu, output: list[dict[str, Any]],
                        max_chars: int) -> Message:
        """What the parent sees of a finished child: which calls ran and how each ended, never
        what a tool returned. A tool's text stays in the frame that called it (and in the run's
        result for the caller), so text that imitates an instruction or a routing answer
        cannot steer a decision outside its branch."""
        summary = [{"call": path, "status": status} for path, status in call_statuses(output)]
        return Message("user", f"{child.name} finished: {_clip_json(summary, max_chars)}\n"
                               f"{next_hint(menu)}")

    def child_back_turn(self, child: Node, menu: Menu,
                        reason: str = "nothing there fits") -> Message:
        return Message("user", f"{child.name}: {reason}.\n{next_hint(menu)}")

    def invalid_answer_turn(self, problem: str, menu: Menu) -> Message:
        return Message("user", f"That answer was not valid: {problem}\nAnswer with one of: "
                               f"{', '.join(menu.options)}.")

    def _option_line(self, child: Node) -> str:
        text = f"- {child.name}: {self._clip(child.description)}"
        if child.is_leaf and self.style.show_schemas:
            schema = json.dumps(child.parameters or {}, ensure_ascii=False,
                                separators=(",", ":"))
            text += f" Parameters: {schema}"
        elif child.is_leaf and child.parameters:
            props: Mapping[str, Any] = child.parameters.get("properties", {})
            if props:
                text += f" (arguments: {', '.join(props)})"
        return text

    def _clip(self, text: str) -> str:
        limit = self.style.max_description_chars
        text = " ".join(text.split())
        return text if len(text) <= limit else text[: limit - 1] + "…"


def _state_help(node: Node, state: CompletionState) -> str:
    return ROOT_DONE_HELP if node.depth == 0 and state is CompletionState.DONE \
        else STATE_HELP[state]


def next_hint(menu: Menu) -> str:
    states = " or ".join(s.value for s in menu.states)
    return f"Answer with the next option, or {states}." if menu.children else \
        f"Answer {states}."


def call_statuses(output: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(leaf path, "ok" | "failed" | "rejected") for each call in a frame's output, nested
    routers' calls included, in order; a child router that made no call is "empty"."""
    out: list[tuple[str, str]] = []
    for entry in output:
        path = str(entry.get("path", ""))
        if "output" in entry:
            inner = call_statuses(list(entry["output"] or []))
            out.extend(inner or [(path, "empty")])
        elif entry.get("rejected"):
            out.append((path, "rejected"))
        else:
            out.append((path, "failed" if "error" in entry else "ok"))
    return out


def arguments_overview(leaf: Node, request: str, *, ask: str | None = None) -> Message:
    """The arguments prompt of value-by-value filling (`server/routing/arguments`): each
    property's type, description, enum and format, the leaf's `examples` (with their
    arguments where the catalog gives them) as few-shot lines, then the request quoted last,
    right before the first ask (`value_ask`, or the whole object's)."""
    lines = [f"Arguments of {leaf.name}:", *property_lines(leaf.parameters)]
    lines.extend(example_lines(leaf))
    lines.append(f"Request: {json.dumps(request, ensure_ascii=False)}")
    lines.append(ask or "Write the JSON arguments, copying the values from the request.")
    return Message("user", "\n".join(lines))


def property_lines(schema: Mapping[str, Any] | None) -> list[str]:
    """One line per property: name, type, required, enum, format or pattern, description."""
    properties: Mapping[str, Any] = (schema or {}).get("properties") or {}
    if not properties:
        return ["(none: answer {})"]
    required = set((schema or {}).get("required") or ())
    lines = []
    for name, prop in properties.items():
        prop = prop if isinstance(prop, Mapping) else {}
        facts = [str(prop["type"])] if "type" in prop else []
        facts.append("required" if name in required else "optional")
        if "enum" in prop:
            facts.append("one of " + ", ".join(json.dumps(v, ensure_ascii=False)
                                               for v in prop["enum"]))
        for key in ("format", "pattern"):
            if key in prop:
                facts.append(f"{key} {prop[key]}")
        text = " ".join(str(prop.get("description", "")).split())
        lines.append(f"- {name} ({'; '.join(facts)})" + (f": {text}" if text else ""))
    return lines


def example_lines(leaf: Node, limit: int = 3) -> list[str]:
    """The leaf's catalog `examples` as few-shot lines: a request, with its arguments where
    the catalog gives them ({"request": …, "arguments": {…}})."""
    examples = leaf.metadata.get("examples") or []
    lines = []
    for example in list(examples)[:limit]:
        if isinstance(example, Mapping) and "request" in example:
            shown = json.dumps(str(example["request"]), ensure_ascii=False)
            if isinstance(example.get("arguments"), Mapping):
                shown += " → " + json.dumps(example["arguments"], ensure_ascii=False)
            lines.append(f"- {shown}")
        elif isinstance(example, str):
            lines.append(f"- {json.dumps(example, ensure_ascii=False)}")
    return ["Examples:", *lines] if lines else []


def value_ask(name: str, *, is_optional: bool) -> str:
    """The question one constrained value choice answers (`server/routing/arguments`)."""
    if is_optional:
        return f"Value of {name}, copied from the request (NONE if the request gives none):"
    return f"Value of {name}, copied from the request:"


def rest_ask(names: list[str]) -> str:
    """The ask for the arguments no candidate in the request could give (free JSON)."""
    return (f"Write the JSON object of the remaining arguments ({', '.join(names)}), "
            "copying the values from the request.")


def rewrite_ask() -> str:
    """The ask for a leaf's arguments again, whole, after its schema refused the last ones."""
    return ("Those arguments did not match the schema. Write the JSON object of the "
            "arguments again, copying the values from the request.")


def answer(choice: str) -> Message:
    return Message("assistant", choice)


def _clip_json(value: Any, max_chars: int) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"
