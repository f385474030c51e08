"""Small fake OpenAI-compatible upstreams (FastAPI apps, served on loopback with
`live_server.serve`) for the remote engine's tests: each answers from a `Script`.

    chat = Script((503, {"error": {"message": "warming up"}}, {}), OK)
    with serve(fake_server(chat)) as url, RemoteEngine(base_url=url) as remote:
        ...
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from stackroute.server.engines.remote_engine import RemoteOptions

Answer = tuple[int, dict[str, Any], dict[str, str]]  # status, JSON body, headers
FAST_RETRY = RemoteOptions(backoff_s=0.01, max_backoff_s=0.05, max_retries=3, timeout_s=30)


class Script:
    """What a fake server answers, in order; the last answer repeats. `delay_s` holds every
    answer back that long (a slow upstream)."""

    def __init__(self, *answers: Answer, delay_s: float = 0.0) -> None:
        self.answers = list(answers)
        self.bodies: list[dict[str, Any]] = []
        self.delay_s = delay_s

    def next(self) -> Answer:
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def fake_server(chat: Script, models: Script | None = None) -> FastAPI:
    app = FastAPI()
    listed = models or Script((200, {"data": [{"id": "fake", "max_model_len": 2048}]}, {}))

    @app.get("/v1/models")
    async def list_models() -> JSONResponse:
        status, body, headers = listed.next()
        return JSONResponse(body, status_code=status, headers=headers)

    @app.post("/v1/chat/completions")
    async def complete(request: Request) -> JSONResponse:
        chat.bodies.append(await request.json())
        if chat.delay_s:
            await asyncio.sleep(chat.delay_s)
        status, body, headers = chat.next()
        return JSONResponse(body, status_code=status, headers=headers)

    return app


def completion(text: str, *, finish: str = "stop",
               logprobs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A chat completion answering `text`, with logprobs over "a" and "b" unless given."""
    if logprobs is None:
        logprobs = [{"token": text, "logprob": -0.1, "bytes": list(text.encode()),
                     "top_logprobs": [{"token": text, "logprob": -0.1},
                                      {"token": "b" if text == "a" else "a",
                                       "logprob": math.log(1 - math.exp(-0.1))}]}]
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": finish, "logprobs": {"content": logprobs}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11,
                      "prompt_tokens_details": {"cached_tokens": 4}}}


OK: Answer = (200, completion("a"), {})
UNAVAILABLE: Answer = (503, {"error": {"message": "warming up"}}, {})
