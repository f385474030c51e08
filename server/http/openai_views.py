"""OpenAI's response shapes from an engine's `Generation`: finish reasons, usage, logprobs,
and the chunks of a streamed answer."""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator
from typing import Any

from fastapi.responses import StreamingResponse
from stackroute.runtime.usage import Usage
from stackroute.server.engines.base import Generation, TokenLogprob
from stackroute.server.http.openai_schemas import (
    ChatCompletion,
    ChatLogprobs,
    Completion,
    CompletionLogprobs,
    CompletionUsage,
    FinishReason,
    PromptTokensDetails,
    TokenLogprobOut,
    TopLogprob,
)

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


def chat_chunks(c: ChatCompletion, include_usage: bool) -> list[dict[str, Any]]:
    head = {"id": c.id, "object": "chat.completion.chunk", "created": c.created,
            "model": c.model}
    choice = c.choices[0]
    logprobs = choice.logprobs.model_dump() if choice.logprobs is not None else None

    def chunk(delta: dict[str, Any], **extra: Any) -> dict[str, Any]:
        entry = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None} | extra
        return {**head, "choices": [entry]}

    chunks = [chunk({"role": "assistant", "content": ""}),
              chunk({"content": choice.message.content}, logprobs=logprobs),
              chunk({}, finish_reason=choice.finish_reason)]
    if include_usage:
        chunks.append({**head, "choices": [], "usage": c.usage.model_dump()})
    return chunks


def completion_chunks(c: Completion, include_usage: bool) -> list[dict[str, Any]]:
    head = {"id": c.id, "object": "text_completion", "created": c.created, "model": c.model}
    chunks = []
    for choice in c.choices:
        logprobs = choice.logprobs.model_dump() if choice.logprobs is not None else None
        chunks.append({**head, "choices": [{"index": choice.index, "text": choice.text,
                                            "logprobs": logprobs, "finish_reason": None}]})
        chunks.append({**head, "choices": [{"index": choice.index, "text": "",
                                            "logprobs": None,
                                            "finish_reason": choice.finish_reason}]})
    if include_usage:
        chunks.append({**head, "choices": [], "usage": c.usage.model_dump()})
    return chunks


def sse(chunks: list[dict[str, Any]]) -> StreamingResponse:
    async def events() -> AsyncIterator[str]:
        for chunk in chunks:
            yield f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n"
        yield "data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
