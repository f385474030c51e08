"""Asking an OpenAI tools client's user for the values a call needs, in words.

A tools turn whose call waits for values the request did not hold (`PendingCall.
missing_values`) answers with an assistant message instead of a `tool_call`: a question
(`values_question`). The client sends the conversation back with the user's answer; that
turn routes the user's words since the last tool exchange, the question's answers included
(`routed_task`), so "Send money to Asha" + "500" is routed as one request. No run is kept
between the two: the answer may change the request too ("make it Bo, 500").

The question starts with `QUESTION_OPENING`: that is how `routed_task` knows an assistant
message is one of ours (any other assistant message ends the request, as before).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

QUESTION_OPENING = "To call "


@dataclass(frozen=True, kw_only=True)
class Turn:
    """One conversation message as `routed_task` reads it."""

    role: str  # system | developer | user | assistant | tool
    text: str
    has_tool_calls: bool = False


def values_question(function: str, arguments: Mapping[str, Any],
                    asked: Mapping[str, Any]) -> str:
    """The question for a call to `function` that waits for the `asked` values (their schemas
    by name: `values_schema(...)["properties"]`).

    >>> print(values_question("send_money", {"payee": "Asha"},
    ...                       {"amount": {"type": "number", "description": "EUR"}}))
    To call send_money (payee: "Asha") I still need the amount (number: EUR). What should it be?
    """
    needs = [described_value(name, schema) for name, schema in asked.items()]
    listed = needs[0] if len(needs) == 1 else ", ".join(needs[:-1]) + " and " + needs[-1]
    ending = "What should it be?" if len(needs) == 1 else "What should they be?"
    return (f"{QUESTION_OPENING}{described_call(function, arguments)} I still need the "
            f"{listed}. {ending}")


def described_call(function: str, arguments: Mapping[str, Any]) -> str:
    """A call waiting for values, as a person reads it: the tool and what it already has.

    >>> described_call("send_money", {"payee": "Asha"}), described_call("balance", {})
    ('send_money (payee: "Asha")', 'balance')
    """
    given = ", ".join(f"{name}: {_shown(value)}" for name, value in arguments.items())
    return f"{function} ({given})" if given else function


def routed_task(turns: Sequence[Turn]) -> str:
    """The request a tools turn routes: the last user message, with the user messages before
    it back to the last of our questions' openings joined in order (newline-separated), so
    an answer is routed with what it answers.

    >>> routed_task([Turn(role="user", text="hi"), Turn(role="assistant", text="Hello!"),
    ...              Turn(role="user", text="Send money to Asha"),
    ...              Turn(role="assistant", text="To call send_money I still need ..."),
    ...              Turn(role="user", text="500")])
    'Send money to Asha\\n500'
    """
    users: list[str] = []
    for turn in reversed(turns):
        if turn.role == "user":
            users.append(turn.text)
        elif _ends_request(turn, has_words=bool(users)):
            break
    return "\n".join(reversed(users))


def _ends_request(turn: Turn, *, has_words: bool) -> bool:
    """A tool exchange ends the request; so does an assistant message after the user's last
    words, unless it is one of our questions."""
    if turn.role == "tool" or turn.has_tool_calls:
        return True
    return turn.role == "assistant" and has_words and not turn.text.startswith(QUESTION_OPENING)


def described_value(name: str, schema: Any) -> str:
    """A value asked for, as a person reads it: its name, type (or choices) and description.

    >>> described_value("seat", {"enum": ["aisle", "window"]})
    'seat (one of "aisle", "window")'
    """
    schema = schema if isinstance(schema, Mapping) else {}
    kind = "one of " + ", ".join(map(_shown, schema["enum"])) if "enum" in schema \
        else str(schema.get("type", "value"))
    description = str(schema.get("description") or "").strip().rstrip(".")
    return f"{name} ({kind}{': ' + description if description else ''})"


def _shown(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
