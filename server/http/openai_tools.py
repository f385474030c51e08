"""Tool calling on `POST /v1/chat/completions`: a request with `tools` is routed through their
tree (`server/service/tool_runs.py`), and the call it decides comes back as OpenAI's
`tool_calls` with `finish_reason: "tool_calls"`, whole or streamed as deltas.

A request whose conversation ends with `tool` messages resumes the run that made the call
(the `tool_call` id names it). When the run ends without a call (`tool_choice` allowing it),
the endpoint answers in words as plain chat does, with the routing's usage added
(`RoutedChat.usage`). When the call waits for values the request did not hold, the answer is
a question in words (`values_question.py`; `tool_routing.outcome` "values_needed"), and the
user's reply is routed with the request it completes.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from fastapi import Request
from stackroute.runtime.errors import InputError
from stackroute.runtime.missing_values import values_schema
from stackroute.runtime.usage import Usage
from stackroute.server.http import openai_views as views
from stackroute.server.http.app_state import AppState
from stackroute.server.http.openai_schemas import (
    AssistantMessage,
    ChatChoice,
    ChatCompletion,
    ChatCompletionRequest,
    ChatMessage,
    CompletionUsage,
)
from stackroute.server.http.openai_tool_schemas import (
    DeclinedOut,
    FunctionCall,
    NamedToolChoice,
    ToolCallOut,
    ToolRouting,
)
from stackroute.server.http.sse import SseEvent
from stackroute.server.routing.abstention import declined
from stackroute.server.service.outcomes import routing_outcome
from stackroute.server.service.tool_catalogs import ToolCatalog, ToolCatalogs
from stackroute.server.service.tool_runs import (
    ChoiceMode,
    ToolResult,
    ToolRunStore,
    ToolTurn,
    ToolTurnRequest,
    TurnOutcome,
    machine_call_id,
    run_tool_turn,
    tool_call_id,
)
from stackroute.server.service.values_question import Turn, routed_task, values_question

ARGUMENT_PIECE_CHARS = 16  # a streamed call's arguments go out in pieces of this size
_SETUP_LOCK = threading.Lock()


@dataclass(frozen=True, kw_only=True)
class ToolCalling:
    """What tool calling keeps across requests: built tool catalogs and waiting runs."""

    catalogs: ToolCatalogs
    runs: ToolRunStore


@dataclass(frozen=True, kw_only=True)
class RoutedChat:
    turn: ToolTurn
    catalog: ToolCatalog
    is_catalog_cached: bool

    @property
    def usage(self) -> Usage:
        return self.turn.usage

    @property
    def num_routing_calls(self) -> int:
        return len(self.turn.routing_events)

    def routing(self) -> ToolRouting:
        return ToolRouting(
            catalog=self.catalog.entry.id, is_catalog_cached=self.is_catalog_cached,
            catalog_build_ms=0.0 if self.is_catalog_cached else round(self.catalog.build_ms, 1),
            num_tools=self.catalog.num_tools, run_id=self.turn.run_id,
            outcome=self.turn.outcome.value,
            path=None if self.turn.call is None else self.turn.call.path,
            written_values=[] if self.turn.call is None
            else list(self.turn.call.written_values),
            missing_values=[] if self.turn.call is None
            else list(self.turn.call.missing_values),
            declined=self._declined())

    def _declined(self) -> DeclinedOut | None:
        stop = declined(self.turn.routing_events)
        if stop is None:
            return None
        leaf = self.catalog.tree.get(stop.leaf)
        return DeclinedOut(function=stop.leaf if leaf is None
                           else self.catalog.function_name(leaf),
                           path=stop.leaf, fit=stop.fit, threshold=stop.threshold)

    @property
    def is_tool_call(self) -> bool:
        return self.turn.outcome is TurnOutcome.TOOL_CALL

    @property
    def is_question(self) -> bool:
        return self.turn.outcome is TurnOutcome.VALUES_NEEDED

    def question(self) -> str:
        """The question for the values the call waits for (`values_question.py`)."""
        call, leaf = self.turn.call, self.turn.leaf
        if call is None or leaf is None:
            raise RuntimeError("a question without a call")  # our bug
        asked = values_schema(leaf.parameters, call.missing_values)["properties"]
        return values_question(self.catalog.function_name(leaf), call.arguments, asked)


def is_routed(body: ChatCompletionRequest) -> bool:
    """A request with tools, and a tool_choice other than none, is routed."""
    return bool(body.tools) and body.tool_choice != "none"


async def route_chat(body: ChatCompletionRequest, state: AppState,
                     request: Request) -> RoutedChat:
    """Build (or find) the tools' catalog, then route one turn, in the engine queue."""
    tools = [t.model_dump(exclude_none=True) for t in body.tools or ()]
    calling = _tool_calling(state, request)
    turn_request = _turn_request(body, calling.runs)
    context = state.service().route_context

    def call() -> RoutedChat:  # a worker thread
        catalog, is_cached = calling.catalogs.get(tools)
        turn = run_tool_turn(catalog, turn_request, context, calling.runs)
        return RoutedChat(turn=turn, catalog=catalog, is_catalog_cached=is_cached)

    routed = await state.engine_queue.run(call)
    for event in routed.turn.routing_events:
        state.metrics.observe_routing_call(outcome=routing_outcome(routed.catalog.tree, event),
                                           usage=Usage.from_dict(dict(event.usage or {})))
    return routed


def completion_usage(usage: Usage, *, routing_calls: int | None) -> CompletionUsage:
    """OpenAI's usage, with the engine's own figures (model calls, prefill) beside it."""
    out = views.usage(usage)
    return out.model_copy(update={"model_calls": usage.model_calls,
                                  "routing_calls": routing_calls,
                                  "prefill_tokens": usage.prefill_tokens})


def tool_call_completion(head: dict[str, Any], routed: RoutedChat) -> ChatCompletion:
    return ChatCompletion(
        **head, choices=[ChatChoice(
            index=0, message=AssistantMessage(content=None, tool_calls=[_call_out(routed)]),
            logprobs=None, finish_reason="tool_calls")],
        usage=completion_usage(routed.usage, routing_calls=routed.num_routing_calls),
        tool_routing=routed.routing())


async def tool_call_stream(head: dict[str, Any], routed: RoutedChat, *,
                           include_usage: bool) -> AsyncIterator[SseEvent]:
    """The call as `chat.completion.chunk` deltas: its id and name first, then its arguments
    in pieces, then `finish_reason: "tool_calls"` (and the usage), then `[DONE]`."""
    head = {**head, "object": "chat.completion.chunk"}
    call = _call_out(routed)
    chunk = _chunks(head)

    yield chunk({"role": "assistant", "content": None, "tool_calls": [{
        "index": 0, "id": call.id, "type": "function",
        "function": {"name": call.function.name, "arguments": ""}}]})
    text = call.function.arguments
    for at in range(0, len(text), ARGUMENT_PIECE_CHARS):
        yield chunk({"tool_calls": [{"index": 0, "function": {
            "arguments": text[at:at + ARGUMENT_PIECE_CHARS]}}]})
    yield chunk({}, finish_reason="tool_calls")
    if include_usage:
        usage = completion_usage(routed.usage, routing_calls=routed.num_routing_calls)
        yield SseEvent({**head, "choices": [], "usage": usage.model_dump(exclude_none=True),
                        "tool_routing": routed.routing().model_dump()})
    yield SseEvent("[DONE]")


def question_completion(head: dict[str, Any], routed: RoutedChat) -> ChatCompletion:
    """The question for the values a call waits for, as the assistant's answer."""
    return ChatCompletion(
        **head, choices=[ChatChoice(
            index=0, message=AssistantMessage(content=routed.question()), logprobs=None,
            finish_reason="stop")],
        usage=completion_usage(routed.usage, routing_calls=routed.num_routing_calls),
        tool_routing=routed.routing())


async def question_stream(head: dict[str, Any], routed: RoutedChat, *,
                          include_usage: bool) -> AsyncIterator[SseEvent]:
    """The question as `chat.completion.chunk` deltas: the role, the text, the finish."""
    head = {**head, "object": "chat.completion.chunk"}
    chunk = _chunks(head)
    yield chunk({"role": "assistant", "content": routed.question()})
    yield chunk({}, finish_reason="stop")
    if include_usage:
        usage = completion_usage(routed.usage, routing_calls=routed.num_routing_calls)
        yield SseEvent({**head, "choices": [], "usage": usage.model_dump(exclude_none=True),
                        "tool_routing": routed.routing().model_dump()})
    yield SseEvent("[DONE]")


def _chunks(head: dict[str, Any]) -> Callable[..., SseEvent]:
    """`chunk(delta, finish_reason=None)`: one `chat.completion.chunk` event under `head`."""
    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> SseEvent:
        return SseEvent({**head, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                              "finish_reason": finish_reason}]})

    return chunk


def _call_out(routed: RoutedChat) -> ToolCallOut:
    call, leaf = routed.turn.call, routed.turn.leaf
    if call is None or leaf is None:
        raise RuntimeError("a tool_calls answer without a call")  # our bug
    return ToolCallOut(id=tool_call_id(call.call_id), function=FunctionCall(
        name=routed.catalog.function_name(leaf),
        arguments=json.dumps(call.arguments, ensure_ascii=False)))


def _turn_request(body: ChatCompletionRequest, runs: ToolRunStore) -> ToolTurnRequest:
    choice = body.tool_choice or "auto"
    mode, function = ChoiceMode.AUTO, None
    if isinstance(choice, NamedToolChoice):
        mode, function = ChoiceMode.NAMED, choice.function.name
    elif choice == "required":
        mode = ChoiceMode.REQUIRED
    result = _tool_result(body.messages)
    if result is not None:
        return ToolTurnRequest(task="", mode=mode if mode is not ChoiceMode.NAMED
                               else ChoiceMode.AUTO, result=result)
    if not any(m.role == "user" for m in body.messages):
        raise InputError("messages: a request with tools needs a user message to route")
    task = routed_task([Turn(role=m.role, text=m.text, has_tool_calls=bool(m.tool_calls))
                        for m in body.messages])
    return ToolTurnRequest(task=task, mode=mode, function=function)


def _tool_result(messages: list[ChatMessage]) -> ToolResult | None:
    """The result the conversation ends with: of the trailing `tool` messages, the one that
    answers a call of ours (the run routes one call per turn)."""
    trailing: list[ChatMessage] = []
    for message in reversed(messages):
        if message.role != "tool":
            break
        trailing.append(message)
    for message in reversed(trailing):
        if message.tool_call_id is None:
            raise InputError("messages: a tool message needs tool_call_id")
        if machine_call_id(message.tool_call_id) is not None:
            return ToolResult(call_id=message.tool_call_id, content=message.text)
    return None


def _tool_calling(state: AppState, request: Request) -> ToolCalling:
    """This app's tool calling, made on first use (it needs the service's catalogs)."""
    holder = request.app.state
    with _SETUP_LOCK:
        calling: ToolCalling | None = getattr(holder, "stackroute_tool_calling", None)
        if calling is None:
            settings = state.settings
            calling = ToolCalling(
                catalogs=ToolCatalogs(state.service().catalogs, max_menu=settings.max_tool_menu,
                                      max_entries=settings.max_tool_catalogs),
                runs=ToolRunStore(settings.max_tool_runs))
            holder.stackroute_tool_calling = calling
    return calling
