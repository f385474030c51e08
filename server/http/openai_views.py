"""OpenAI's response shapes from an engine's `Generation`: finish reasons, usage, logprobs,
and the chunks of a streamed answer, sent as the engine produces it."""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from stackroute.runtime.errors import InputError
from stackroute.runtime.usage import Usage
from stackroute.server.engines.base import EngineError, Generation, TextDelta, TokenLogprob
from stackroute.server.http.openai_schemas import (
    ChatLogprobs,
    CompletionLogprobs,
    CompletionUsage,
    FinishReason,
    PromptTokensDetails,
    TokenLogprobOut,
    TopLogprob,
)
from stackroute.server.http.sse import SseEvent

log = logging.getLogger(__name__)

MIN_LOGPROB = -9999.0  # JSON has no -inf; a masked-out token reports this instead


def finish(gen: Generation) -> FinishReason:
    return "length" if gen.finish_reason == "length" else "stop"


def usage(usage: Usage) -> CompletionUsage:
    return CompletionUsage(
        prompt_tokens=usage.prompt_tokens, completion_tokens=usage.generated_tokens,
        total_tokens=usage.prompt_tokens + usage.generated_tokens,
        prompt_tokens_details=PromptTokensDetails(cached_tokens=usage.cached_tokens))


def finite_logprob(value: float) -> float:
    return value if math.isfinite(value) else MIN_LOGPROB


def top_of(entry: TokenLogprob, k: int) -> list[tuple[str, float]]:
    # A token the constraint forced had no alternative: it alone, with its own logprob.
    return list(entry.top[:k]) if entry.top else [(entry.token, entry.logprob)][:k]


def answer_logprobs(gen: Generation) -> list[TokenLogprob]:
    """The answer's entries: the engine also reports the end-of-turn token that stopped a free
    generation, which is not part of the answer (OpenAI reports answer tokens only)."""
    entries = list(gen.logprobs or ())
    return entries[: max(1, gen.usage.generated_tokens)] if entries else entries


def chat_logprobs(gen: Generation, k: int | None) -> ChatLogprobs | None:
    if k is None:
        return None
    content = [TokenLogprobOut(
        token=t.token, logprob=finite_logprob(t.logprob), bytes=list(t.token.encode()),
        top_logprobs=[TopLogprob(token=tok, logprob=finite_logprob(value),
                                 bytes=list(tok.encode()))
                      for tok, value in top_of(t, k)])
        for t in answer_logprobs(gen)]
    return ChatLogprobs(content=content)


def completion_logprobs(gen: Generation, k: int | None) -> CompletionLogprobs | None:
    if k is None:
        return None
    entries = answer_logprobs(gen)
    offsets, at = [], 0
    for t in entries:
        offsets.append(at)
        at += len(t.token)
    return CompletionLogprobs(
        tokens=[t.token for t in entries],
        token_logprobs=[finite_logprob(t.logprob) for t in entries],
        top_logprobs=[{tok: finite_logprob(value) for tok, value in top_of(t, k)}
                      for t in entries],
        text_offset=offsets)


StreamItem = tuple[int, TextDelta | Generation]  # (choice index, a delta or its whole answer)


async def chat_stream(head: dict[str, Any], items: AsyncGenerator[StreamItem, None], *,
                      top_logprobs: int | None, include_usage: bool,
                      request_id: str | None,
                      routed_usage: Usage | None = None) -> AsyncIterator[SseEvent]:
    """`chat.completion.chunk` events as the engine produces the answer: the role, one chunk
    per delta, then the finish reason (with the answer's logprobs, when asked for), the usage
    (with `include_usage`; `routed_usage`: the tools' routing calls before the answer, added)
    and `[DONE]`. An error after the first chunk is an `error` event."""
    head = {**head, "object": "chat.completion.chunk"}

    def chunk(delta: dict[str, Any], **extra: Any) -> SseEvent:
        entry = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None} | extra
        return SseEvent({**head, "choices": [entry]})

    yield chunk({"role": "assistant", "content": ""})
    try:
        async for _, value in items:
            if isinstance(value, TextDelta):
                yield chunk({"content": value.text})
                continue
            logprobs = chat_logprobs(value, top_logprobs)
            yield chunk({}, finish_reason=finish(value),
                        logprobs=None if logprobs is None else logprobs.model_dump())
            if include_usage:
                total = value.usage if routed_usage is None else value.usage + routed_usage
                yield SseEvent({**head, "choices": [],
                                "usage": usage(total).model_dump(exclude_none=True)})
    except Exception as error:  # the stream has begun: an error event, not a status
        yield SseEvent(stream_error(error, request_id))
    finally:
        await items.aclose()
    yield SseEvent("[DONE]")


async def completion_stream(head: dict[str, Any], items: AsyncGenerator[StreamItem, None], *,
                            top_logprobs: int | None, include_usage: bool,
                            request_id: str | None) -> AsyncIterator[SseEvent]:
    """`text_completion` events: each prompt's deltas under its index, then its finish reason
    (with its logprobs, when asked for); the summed usage (with `include_usage`); `[DONE]`."""
    head = {**head, "object": "text_completion"}
    total = Usage()

    def chunk(index: int, text: str, **extra: Any) -> SseEvent:
        entry = {"index": index, "text": text, "logprobs": None, "finish_reason": None} | extra
        return SseEvent({**head, "choices": [entry]})

    try:
        async for index, value in items:
            if isinstance(value, TextDelta):
                yield chunk(index, value.text)
                continue
            total = total + value.usage
            logprobs = completion_logprobs(value, top_logprobs)
            yield chunk(index, "", finish_reason=finish(value),
                        logprobs=None if logprobs is None else logprobs.model_dump())
        if include_usage:
            yield SseEvent({**head, "choices": [], "usage": usage(total).model_dump()})
    except Exception as error:  # the stream has begun: an error event, not a status
        yield SseEvent(stream_error(error, request_id))
    finally:
        await items.aclose()
    yield SseEvent("[DONE]")


def stream_error(error: Exception, request_id: str | None) -> dict[str, Any]:
    """The `error` event of a stream that failed after its first chunk (its status is sent)."""
    if isinstance(error, InputError | EngineError):
        return {"error": {"code": error.code, "message": str(error),
                          "type": "invalid_request_error" if isinstance(error, InputError)
                          else "server_error", "request_id": request_id}}
    log.error("a streamed answer failed", exc_info=error, extra={"request_id": request_id})
    return {"error": {"code": "internal_error", "type": "server_error", "request_id": request_id,
                      "message": f"internal server error (request id {request_id}); the "
                                 "server log has the details"}}
