"""The remote engine's request bodies and response shapes: a prompt and a constraint as an
OpenAI-compatible body (vLLM's `structured_outputs`, OpenAI's `response_format`), and a
completion read back as text, usage, logprobs and exact-byte token steps. An answer that
breaks its constraint means the server ignored it: `check_answer` raises
`RemoteFeatureError` rather than let it pass as a decision.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from stackroute.runtime.prompt import Prompt
from stackroute.runtime.usage import Usage
from stackroute.server.engines.base import (
    EMPTY_OBJECT_SCHEMA,
    Constraint,
    ConstraintKind,
    PromptInput,
    TokenLogprob,
)
from stackroute.server.engines.option_scoring import MASKED_LOGPROB, TokenStep
from stackroute.server.engines.remote_errors import RemoteFeatureError


def parse_completion(data: Mapping[str, Any], *, is_chat: bool, latency_ms: float,
                     ) -> tuple[str, Any, tuple[TokenLogprob, ...] | None, list[TokenStep], Usage]:
    """A completion's text, finish reason, logprobs, token steps (exact bytes when the server
    sends `bytes`: a byte-level token can be half a character) and usage; an unexpected shape
    is a `RemoteFeatureError`."""
    try:
        choice = data["choices"][0]
        text = choice["message"]["content"] if is_chat else choice["text"]
        finish = choice.get("finish_reason")
        if is_chat:
            logprobs, steps = chat_logprobs(choice)
        else:
            logprobs = completion_logprobs(choice)
            steps = [TokenStep(e.token.encode(), e.logprob, tuple(
                (t.encode(), lp) for t, lp in e.top)) for e in logprobs or ()]
        usage = usage_of(data.get("usage") or {}, latency_ms)
    except (KeyError, IndexError, TypeError, ValueError) as error:
        raise RemoteFeatureError(f"the server's completion has an unexpected shape "
                                 f"({error!r}): {json.dumps(data)[:300]}") from error
    return text, finish, logprobs, steps, usage


def prompt_body(prompt: PromptInput) -> dict[str, Any]:
    if isinstance(prompt, Prompt):
        return {"messages": [m.to_dict() for m in prompt.messages]}
    return {"prompt": prompt}


def constraint_body(constraint: Constraint | None, *, is_chat: bool) -> dict[str, Any]:
    """vLLM's `structured_outputs` for a choice or a regex; OpenAI's `response_format` for a
    JSON schema in chat (the most widely served form), `structured_outputs` otherwise."""
    if constraint is None:
        return {}
    if constraint.kind is ConstraintKind.CHOICE:
        return {"structured_outputs": {"choice": list(constraint.choices)}}
    if constraint.kind is ConstraintKind.REGEX:
        return {"structured_outputs": {"regex": constraint.pattern or ""}}
    schema = dict(constraint.schema or EMPTY_OBJECT_SCHEMA)
    if is_chat:
        return {"response_format": {"type": "json_schema", "json_schema": {
            "name": "output", "schema": schema, "strict": True}}}
    return {"structured_outputs": {"json": schema}}


def check_answer(text: str, constraint: Constraint) -> None:
    """A finished answer that breaks its constraint: the server ignored the constraint."""
    problem = None
    if constraint.kind is ConstraintKind.CHOICE and text not in constraint.choices:
        problem = f"answered {text[:200]!r}, which is not one of the {len(constraint.choices)} " \
                  "options"
    elif constraint.kind is ConstraintKind.JSON:
        import jsonschema

        try:
            jsonschema.validate(json.loads(text), dict(constraint.schema or {}))
        except (ValueError, jsonschema.ValidationError) as error:
            problem = f"answered {text[:200]!r}, which does not match the JSON schema " \
                      f"({str(error).splitlines()[0]})"
    elif constraint.kind is ConstraintKind.REGEX:
        try:
            pattern = re.compile(constraint.pattern or "")
        except re.error:
            pattern = None  # a grammar dialect Python's re does not read: trust the server
        if pattern is not None and pattern.fullmatch(text) is None:
            problem = f"answered {text[:200]!r}, which does not match the regex"
    if problem is not None:
        raise RemoteFeatureError(f"the server ignored the {constraint.kind.value} constraint: "
                                 f"{problem} (it needs vLLM's structured_outputs; the old "
                                 "guided_* fields are silently ignored by vLLM ≥ 0.12)")


def _lp(value: Any) -> float:
    number = float(value)
    return -math.inf if number <= MASKED_LOGPROB else number


def _bytes_of(entry: Mapping[str, Any]) -> bytes:
    raw = entry.get("bytes")
    return bytes(raw) if raw is not None else str(entry["token"]).encode()


def chat_logprobs(choice: Mapping[str, Any],
                   ) -> tuple[tuple[TokenLogprob, ...] | None, list[TokenStep]]:
    content = (choice.get("logprobs") or {}).get("content")
    if content is None:
        return None, []
    entries, steps = [], []
    for e in content:
        top = e.get("top_logprobs") or ()
        entries.append(TokenLogprob(token=str(e["token"]), logprob=_lp(e["logprob"]),
                                    top=tuple((str(t["token"]), _lp(t["logprob"]))
                                              for t in top)))
        steps.append(TokenStep(_bytes_of(e), _lp(e["logprob"]),
                               tuple((_bytes_of(t), _lp(t["logprob"])) for t in top)))
    return tuple(entries), steps


def completion_logprobs(choice: Mapping[str, Any]) -> tuple[TokenLogprob, ...] | None:
    raw = choice.get("logprobs")
    if not raw:
        return None
    tops = raw.get("top_logprobs") or [None] * len(raw["tokens"])
    return tuple(TokenLogprob(token=str(t), logprob=_lp(lp),
                              top=tuple((str(k), _lp(v)) for k, v in (top or {}).items()))
                 for t, lp, top in zip(raw["tokens"], raw["token_logprobs"], tops, strict=True))


def usage_of(raw: Mapping[str, Any], latency_ms: float) -> Usage:
    prompt = int(raw.get("prompt_tokens") or 0)
    cached = int((raw.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    return Usage(model_calls=1, prompt_tokens=prompt, prefill_tokens=max(0, prompt - cached),
                 cached_tokens=cached, generated_tokens=int(raw.get("completion_tokens") or 0),
                 latency_ms=latency_ms)


class StreamedCompletion:
    """A streamed completion's events gathered into the shape of a non-streamed one (so
    `parse_completion` reads both): `add` takes one event and returns its new text."""

    def __init__(self, *, is_chat: bool) -> None:
        self.is_chat = is_chat
        self.pieces: list[str] = []
        self.finish_reason: Any = None
        self.chat_logprobs: list[Any] | None = None
        self.tokens: dict[str, list[Any]] | None = None  # completions' parallel lists
        self.usage: Mapping[str, Any] | None = None

    def add(self, event: Mapping[str, Any]) -> str:
        try:
            if event.get("usage"):
                self.usage = event["usage"]
            choices = event.get("choices") or ()
            if not choices:
                return ""
            choice = choices[0]
            if choice.get("finish_reason") is not None:
                self.finish_reason = choice["finish_reason"]
            text = (choice.get("delta") or {}).get("content") if self.is_chat \
                else choice.get("text")
            self._add_logprobs(choice.get("logprobs"))
        except (AttributeError, KeyError, IndexError, TypeError) as error:
            raise RemoteFeatureError(f"the server's stream event has an unexpected shape "
                                     f"({error!r}): {json.dumps(event)[:300]}") from error
        text = str(text or "")
        self.pieces.append(text)
        return text

    def _add_logprobs(self, raw: Any) -> None:
        if not raw:
            return
        if self.is_chat:
            self.chat_logprobs = [*(self.chat_logprobs or []), *(raw.get("content") or ())]
            return
        tokens = self.tokens or {"tokens": [], "token_logprobs": [], "top_logprobs": []}
        tokens["tokens"] += raw["tokens"]
        tokens["token_logprobs"] += raw["token_logprobs"]
        tokens["top_logprobs"] += raw.get("top_logprobs") or [None] * len(raw["tokens"])
        self.tokens = tokens

    def as_completion(self) -> dict[str, Any]:
        text = "".join(self.pieces)
        choice: dict[str, Any] = {"finish_reason": self.finish_reason}
        if self.is_chat:
            choice["message"] = {"content": text}
            if self.chat_logprobs is not None:
                choice["logprobs"] = {"content": self.chat_logprobs}
        else:
            choice["text"] = text
            choice["logprobs"] = self.tokens
        return {"choices": [choice], "usage": dict(self.usage or {})}
