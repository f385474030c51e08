"""The OpenAI-compatible API: `GET /v1/models`, `POST /v1/chat/completions`,
`POST /v1/completions`, with vLLM's `structured_outputs` and OpenAI's `response_format`.

A request becomes (prompt, constraint, sampling options), runs through the engine queue in a
worker thread, and the engine's `Generation` becomes OpenAI's response shape. With `stream:
true` the engine's `generate_stream` sends the answer piece by piece as it decodes (under the
same constraint: `structured_outputs` and `response_format` stream too) and each piece goes out
as an OpenAI chunk at once (`engine_stream.py` carries them from the worker thread). The
response starts with the first piece, so an error before it (a full queue, a prompt too long)
is still answered with its HTTP status; an error after it is an `error` event.

A chat request with `tools` is routed through their tree (`openai_tools.py`): a decided call
comes back as `tool_calls`; a run that ends without one is answered in words, as here. Fields
this server does not implement are ignored and named (`openai_leniency.py`), or refused with
`strict_openai`.
"""

from __future__ import annotations

import secrets
import time
import uuid
from collections.abc import AsyncGenerator, Callable
from typing import Any

from fastapi import APIRouter, Request, Response
from stackroute.runtime.errors import InputError
from stackroute.runtime.messages import Message
from stackroute.runtime.prompt import Prompt
from stackroute.runtime.usage import Usage
from stackroute.server.engines.base import (
    Constraint,
    ConstraintKind,
    DeltaSink,
    Engine,
    Generation,
    PromptInput,
    SamplingOptions,
)
from stackroute.server.http import openai_leniency, openai_tools
from stackroute.server.http import openai_views as views
from stackroute.server.http.app_state import AppState, get_state
from stackroute.server.http.engine_stream import Finished, stream_call
from stackroute.server.http.errors import InvalidParameterError, error_responses, request_id_of
from stackroute.server.http.openai_constraints import request_constraint
from stackroute.server.http.openai_schemas import (
    MAX_PROMPTS,
    MAX_STOP_STRINGS,
    AssistantMessage,
    ChatChoice,
    ChatCompletion,
    ChatCompletionRequest,
    ChatMessage,
    Completion,
    CompletionChoice,
    CompletionRequest,
    ModelCard,
    ModelList,
)
from stackroute.server.http.sse import sse_response
from stackroute.server.service.engine_queue import EngineQueue

_STARTED_AT = int(time.time())


class UnknownModelError(InputError):
    code = "model_not_found"
    http_status = 404


class PromptTooLongError(InputError):
    code = "prompt_too_long"


_STREAM_DOC = {"text/event-stream": {"schema": {
    "type": "string", "description": "with stream: true, server-sent events `data: <chunk>` "
    "(chat.completion.chunk / text_completion objects), ending with `data: [DONE]`"}}}
_ERRORS = error_responses(400, 404, 413, 422, 429, 500)

router = APIRouter(prefix="/v1", tags=["openai"])


@router.get("/models", response_model=ModelList, summary="The served model")
async def list_models(request: Request) -> ModelList:
    return ModelList(data=[_model_card(get_state(request).engine)])


@router.get("/models/{model_id:path}", response_model=ModelCard, summary="One served model",
            responses=error_responses(404, 500))
async def get_model(model_id: str, request: Request) -> ModelCard:
    engine = get_state(request).engine
    _check_model(engine, model_id)
    return _model_card(engine)


@router.post("/chat/completions", response_model=ChatCompletion, summary="Chat completion",
             responses={200: {"content": _STREAM_DOC}, **_ERRORS})
async def chat_completions(body: ChatCompletionRequest, request: Request,
                           response: Response) -> Any:
    state = get_state(request)
    _check_model(state.engine, body.model)
    headers = _lenient(body, state, request, response)
    _check_common(body)
    n = body.n or 1
    if n > 1 and openai_tools.is_routed(body):
        raise InvalidParameterError("n: a request routed through tools answers once; send "
                                    "n: 1 (or tool_choice: none)", param="n")
    if body.top_logprobs is not None and not body.logprobs:
        raise InvalidParameterError("top_logprobs needs logprobs: true", param="top_logprobs")
    if body.max_tokens is not None and body.max_completion_tokens is not None \
            and body.max_tokens != body.max_completion_tokens:
        raise InvalidParameterError("max_tokens and max_completion_tokens differ; send one",
                                    param="max_completion_tokens")
    max_tokens = (body.max_completion_tokens or body.max_tokens
                  or state.settings.default_max_tokens)
    _check_max_tokens(max_tokens, state.settings.max_output_tokens,
                      "max_completion_tokens" if body.max_completion_tokens else "max_tokens")
    top = (body.top_logprobs or 0) if body.logprobs else None
    constraint = request_constraint(body, state.settings.max_menu_options)
    sampling = _sampling(body, max_tokens=max_tokens, top_logprobs=top)
    prompt = Prompt(_messages(body.messages))
    head = {"id": f"chatcmpl-{uuid.uuid4().hex}", "created": int(time.time()),
            "model": state.engine.info.model}
    routed = await openai_tools.route_chat(body, state, request) \
        if openai_tools.is_routed(body) else None
    if routed is not None and routed.is_tool_call:
        if body.stream:
            return sse_response(openai_tools.tool_call_stream(
                head, routed, include_usage=_include_usage(body)), headers=headers)
        return openai_tools.tool_call_completion(head, routed)
    if routed is not None and routed.is_question:
        if body.stream:
            return sse_response(openai_tools.question_stream(
                head, routed, include_usage=_include_usage(body)), headers=headers)
        return openai_tools.question_completion(head, routed)
    if body.stream:
        items = await _stream(state, [prompt], constraint, sampling, endpoint="chat")
        return sse_response(views.chat_stream(
            head, items, top_logprobs=top, include_usage=_include_usage(body),
            request_id=request_id_of(request),
            routed_usage=None if routed is None else routed.usage), headers=headers)
    generations = []
    for i in range(n):  # each answer its own seed: sampled answers differ
        sampled = sampling if i == 0 else _sampling(
            body, max_tokens=max_tokens, top_logprobs=top, offset=i)
        generations += await _generate(state, [prompt], constraint, sampled, endpoint="chat")
    total = sum((g.usage for g in generations), Usage())
    return ChatCompletion(
        **head, choices=[ChatChoice(index=i, message=AssistantMessage(content=gen.text),
                                    logprobs=views.chat_logprobs(gen, top),
                                    finish_reason=views.finish(gen))
                         for i, gen in enumerate(generations)],
        usage=views.usage(total) if routed is None else openai_tools.completion_usage(
            total + routed.usage, routing_calls=routed.num_routing_calls),
        tool_routing=None if routed is None else routed.routing())


@router.post("/completions", response_model=Completion, summary="Text completion (raw prompt)",
             responses={200: {"content": _STREAM_DOC}, **_ERRORS})
async def completions(body: CompletionRequest, request: Request, response: Response) -> Any:
    state = get_state(request)
    _check_model(state.engine, body.model)
    headers = _lenient(body, state, request, response)
    _check_common(body)
    if body.n is not None and body.n != 1:
        raise InvalidParameterError(f"n: /v1/completions answers each prompt once; send "
                                    f"several prompts instead (got n={body.n})", param="n")
    prompts = [body.prompt] if isinstance(body.prompt, str) else list(body.prompt)
    if not 1 <= len(prompts) <= MAX_PROMPTS:
        raise InvalidParameterError(f"prompt: send 1 to {MAX_PROMPTS} prompts; got "
                                    f"{len(prompts)}", param="prompt")
    _check_max_tokens(body.max_tokens or 16, state.settings.max_output_tokens, "max_tokens")
    constraint = request_constraint(body, state.settings.max_menu_options)
    sampling = _sampling(body, max_tokens=body.max_tokens or 16, top_logprobs=body.logprobs)
    head = {"id": f"cmpl-{uuid.uuid4().hex}", "created": int(time.time()),
            "model": state.engine.info.model}
    if body.stream:
        items = await _stream(state, list(prompts), constraint, sampling,
                              endpoint="completions")
        return sse_response(views.completion_stream(
            head, items, top_logprobs=body.logprobs, include_usage=_include_usage(body),
            request_id=request_id_of(request)), headers=headers)
    generations = await _generate(state, list(prompts), constraint, sampling,
                                  endpoint="completions")
    total = sum((g.usage for g in generations), Usage())
    return Completion(
        **head, choices=[CompletionChoice(index=i, text=g.text, finish_reason=views.finish(g),
                                          logprobs=views.completion_logprobs(g, body.logprobs))
                         for i, g in enumerate(generations)],
        usage=views.usage(total))


# -- request → engine ---------------------------------------------------------------------------
def _check_model(engine: Engine, model: str | None) -> None:
    if model is not None and model != engine.info.model:
        raise UnknownModelError(f"model {model!r} is not served here; this server serves "
                                f"{engine.info.model!r} (GET /v1/models)")


def _check_max_tokens(max_tokens: int, limit: int, param: str) -> None:
    if max_tokens > limit:
        raise InvalidParameterError(f"{param}: at most {limit} on this server; got {max_tokens}",
                                    param=param)


def _lenient(body: ChatCompletionRequest | CompletionRequest, state: AppState,
             request: Request, response: Response) -> dict[str, str]:
    """Name the fields this server ignores (a 400 with `strict_openai`); the header that
    names them is set on `response` and returned for a streamed one."""
    names = openai_leniency.judge(body, is_strict=state.settings.strict_openai,
                                  request_id=request_id_of(request))
    headers = openai_leniency.header_of(names)
    response.headers.update(headers)
    return headers


def _check_common(body: ChatCompletionRequest | CompletionRequest) -> None:
    if body.n is not None and body.n > MAX_PROMPTS:
        raise InvalidParameterError(f"n: at most {MAX_PROMPTS}; got {body.n}", param="n")
    if body.n is not None and body.n > 1 and body.stream:
        raise InvalidParameterError("n: a streamed answer is one answer; send n: 1 with "
                                    "stream: true", param="n")
    if body.stream_options is not None and not body.stream:
        raise InvalidParameterError("stream_options needs stream: true", param="stream_options")
    stops = [body.stop] if isinstance(body.stop, str) else list(body.stop or [])
    if len(stops) > MAX_STOP_STRINGS or any(not s for s in stops):
        raise InvalidParameterError(f"stop: up to {MAX_STOP_STRINGS} non-empty strings",
                                    param="stop")


def _sampling(body: ChatCompletionRequest | CompletionRequest, *, max_tokens: int,
              top_logprobs: int | None, offset: int = 0) -> SamplingOptions:
    """`offset`: the answer's index among n; a seeded request's answers use seed + offset."""
    temperature = body.temperature or 0.0
    # Without a seed a sampled answer should vary between calls, as clients expect.
    seed = (body.seed + offset) % 2**63 if body.seed is not None \
        else None if temperature == 0 else secrets.randbits(63)
    stops = (body.stop,) if isinstance(body.stop, str) else tuple(body.stop or ())
    return SamplingOptions(max_tokens=max_tokens, temperature=temperature, stop=stops,
                           top_logprobs=top_logprobs, seed=seed, top_p=body.top_p or 1.0)


def _include_usage(body: ChatCompletionRequest | CompletionRequest) -> bool:
    return bool(body.stream_options and body.stream_options.include_usage)


def _messages(messages: list[ChatMessage]) -> tuple[Message, ...]:
    """Chat messages as the engine renders them: a tool result as a user turn naming the
    function it came from, an assistant's calls as text when it said nothing else."""
    names = {call.id: call.function.name for m in messages for call in m.tool_calls or ()}
    return tuple(Message("user", f"The tool {names.get(m.tool_call_id or '', 'called')} "
                                 f"returned: {m.text}") if m.role == "tool" else _message(m)
                 for m in messages)


def _message(message: ChatMessage) -> Message:
    if message.role == "assistant" and message.tool_calls and not message.text:
        calls = "; ".join(f"{c.function.name}({c.function.arguments})"
                          for c in message.tool_calls)
        return Message("assistant", f"Calling {calls}")
    return Message("system" if message.role == "developer" else message.role, message.text)


async def _generate(state: AppState, prompts: list[PromptInput], constraint: Constraint | None,
                    sampling: SamplingOptions, *, endpoint: str) -> list[Generation]:
    engine = state.engine
    max_prompt_tokens = state.settings.max_prompt_tokens

    def call() -> list[Generation]:  # runs in a worker thread
        out = []
        for prompt in prompts:
            _check_prompt_tokens(engine, prompt, max_prompt_tokens)
            out.append(_generate_one(engine, prompt, constraint, sampling))
        return out

    queue: EngineQueue = state.engine_queue
    generations = await queue.run(call)
    kind = constraint.kind.value if constraint is not None else "none"
    for gen in generations:
        state.metrics.observe_model_call(endpoint=endpoint, constraint=kind, usage=gen.usage)
    return generations


async def _stream(state: AppState, prompts: list[PromptInput], constraint: Constraint | None,
                  sampling: SamplingOptions, *, endpoint: str,
                  ) -> AsyncGenerator[views.StreamItem, None]:
    """Each prompt's deltas as the engine produces them, then its whole `Generation`, each
    under the prompt's index. The first item has arrived when this returns: an error before
    it (queue full, prompt too long, a bad constraint) is raised here, as an HTTP error."""
    engine = state.engine
    max_prompt_tokens = state.settings.max_prompt_tokens
    kind = constraint.kind.value if constraint is not None else "none"

    def call(send: Callable[[views.StreamItem], None]) -> None:  # runs in a worker thread
        for prompt in prompts:
            _check_prompt_tokens(engine, prompt, max_prompt_tokens)
        for index, prompt in enumerate(prompts):
            gen = _generate_one(engine, prompt, constraint, sampling,
                                on_delta=lambda delta, i=index: send((i, delta)))
            send((index, gen))

    async def items(source: AsyncGenerator[views.StreamItem | Finished[None], None],
                    first: views.StreamItem | Finished[None],
                    ) -> AsyncGenerator[views.StreamItem, None]:
        try:
            item = first
            while not isinstance(item, Finished):
                if isinstance(item[1], Generation):
                    state.metrics.observe_model_call(endpoint=endpoint, constraint=kind,
                                                     usage=item[1].usage)
                yield item
                item = await anext(source)
        finally:
            await source.aclose()

    source = stream_call(state.engine_queue, call)
    first = await anext(source)
    return items(source, first)


def _check_prompt_tokens(engine: Engine, prompt: PromptInput, max_prompt_tokens: int) -> None:
    num_tokens = engine.count_tokens(prompt)
    if num_tokens > max_prompt_tokens:
        raise PromptTooLongError(f"the prompt has {num_tokens} tokens; the limit is "
                                 f"{max_prompt_tokens}")


def _generate_one(engine: Engine, prompt: PromptInput, constraint: Constraint | None,
                  sampling: SamplingOptions, *, on_delta: DeltaSink | None = None,
                  ) -> Generation:
    try:
        if on_delta is not None:
            return engine.generate_stream(prompt, on_delta=on_delta, constraint=constraint,
                                          sampling=sampling)
        return engine.generate(prompt, constraint=constraint, sampling=sampling)
    except InputError:
        raise
    except ValueError as error:
        # The menu compiler rejects options it cannot tell apart (identical tokens, an
        # end-of-turn token inside); that is the caller's input, not our bug.
        if constraint is not None and constraint.kind is ConstraintKind.CHOICE:
            raise InvalidParameterError(f"structured_outputs.choice: {error}",
                                        param="structured_outputs.choice") from error
        raise


# -- engine → response --------------------------------------------------------------------------
def _model_card(engine: Engine) -> ModelCard:
    return ModelCard(id=engine.info.model, created=_STARTED_AT,
                     max_model_len=engine.info.max_context_tokens)
