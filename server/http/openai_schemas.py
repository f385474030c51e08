"""Request and response bodies of the OpenAI-compatible API (pydantic: the HTTP edge).

Requests allow unknown fields so common clients work unchanged: the endpoint names each one it
ignores in a logged warning and the `X-Stackroute-Ignored-Fields` response header, or refuses
it with a 400 when the server runs with `strict_openai` (`openai_leniency.py`). Fields are
those of OpenAI's chat (tool calling included: `openai_tool_schemas.py`) and legacy
completions APIs, plus vLLM's `structured_outputs`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field
from stackroute.server.http.openai_tool_schemas import (
    LENIENT,
    ToolCall,
    ToolCallOut,
    ToolChoice,
    ToolDefinition,
    ToolRouting,
)

_STRICT = LENIENT  # the request models' config: unknown fields are collected, then judged
MAX_STOP_STRINGS = 16
MAX_TOP_LOGPROBS = 20
MAX_PROMPTS = 16  # prompts in one /v1/completions request


# -- requests ----------------------------------------------------------------------------------
class TextPart(BaseModel):
    model_config = _STRICT
    type: Literal["text"]
    text: str


class ChatMessage(BaseModel):
    model_config = _STRICT
    role: Literal["system", "developer", "user", "assistant", "tool"] = Field(
        description="'developer' is read as 'system'; 'tool' hands back a call's result")
    content: str | list[TextPart] | None = Field(
        None, description="text, or text parts joined by newlines; null on an assistant "
                          "message that carries tool_calls")
    name: str | None = Field(None, description="a participant's name; accepted, not used")
    tool_calls: list[ToolCall] | None = Field(None, description="assistant: the calls it made")
    tool_call_id: str | None = Field(None, description="tool: the call this result answers")

    @property
    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(part.text for part in self.content)


class StructuredOutputs(BaseModel):
    """vLLM's constrained decoding: exactly one of `choice`, `json`, `regex`."""

    model_config = _STRICT
    choice: list[str] | None = Field(None, description="answer exactly one of these strings")
    json_schema: dict[str, Any] | str | None = Field(
        None, alias="json", description="a JSON schema (object or JSON text) the answer matches")
    regex: str | None = Field(None, description="a regular expression the whole answer matches")


class JsonSchemaFormat(BaseModel):
    model_config = _STRICT
    name: str | None = None
    description: str | None = None
    json_schema: dict[str, Any] = Field(alias="schema")
    strict: bool | None = Field(None, description="accepted; output always follows the schema")


class ResponseFormatText(BaseModel):
    model_config = _STRICT
    type: Literal["text"]


class ResponseFormatJsonObject(BaseModel):
    model_config = _STRICT
    type: Literal["json_object"]


class ResponseFormatJsonSchema(BaseModel):
    model_config = _STRICT
    type: Literal["json_schema"]
    json_schema: JsonSchemaFormat


ResponseFormat = Annotated[ResponseFormatText | ResponseFormatJsonObject
                           | ResponseFormatJsonSchema, Field(discriminator="type")]


class StreamOptions(BaseModel):
    model_config = _STRICT
    include_usage: bool | None = None


class _SamplingFields(BaseModel):
    """Fields the chat and completions requests share."""

    model_config = _STRICT
    model: str | None = Field(None, description="the served model's id (GET /v1/models)")
    temperature: float | None = Field(None, ge=0, le=2, description="0 or absent: greedy")
    top_p: float | None = Field(None, gt=0, le=1, description="nucleus sampling (with "
                                "temperature > 0): sample from the smallest set of tokens "
                                "whose probabilities sum to top_p")
    n: int | None = Field(None, ge=1, description="answers to generate (not with stream or "
                                                  "tools)")
    stop: str | list[str] | None = Field(None, description="cut the answer before these")
    seed: int | None = Field(None, ge=0, le=2**63 - 1)
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    frequency_penalty: float | None = Field(None, description="only 0 is supported")
    presence_penalty: float | None = Field(None, description="only 0 is supported")
    user: str | None = Field(None, description="an end-user id; recorded nowhere")
    structured_outputs: StructuredOutputs | None = None
    response_format: ResponseFormat | None = None
    metadata: dict[str, Any] | None = Field(None, description="accepted; recorded nowhere")
    store: bool | None = Field(None, description="accepted; nothing is stored for later")


class ChatCompletionRequest(_SamplingFields):
    messages: list[ChatMessage] = Field(min_length=1)
    tools: list[ToolDefinition] | None = Field(
        None, description="functions the request may call: routed through their tree")
    tool_choice: ToolChoice | None = Field(
        None, description="auto (default with tools) | required | none | a named function")
    parallel_tool_calls: bool | None = Field(
        None, description="accepted; the tree routes one call per turn")
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    logprobs: bool | None = False
    top_logprobs: int | None = Field(None, ge=0, le=MAX_TOP_LOGPROBS,
                                     description="needs logprobs: true")


class CompletionRequest(_SamplingFields):
    prompt: str | list[str] = Field(description="raw text (no chat format), or several")
    max_tokens: int | None = Field(16, ge=1)
    logprobs: int | None = Field(None, ge=0, le=MAX_TOP_LOGPROBS,
                                 description="return this many top alternatives per token")


# -- responses ---------------------------------------------------------------------------------
FinishReason = Literal["stop", "length", "tool_calls"]


class TopLogprob(BaseModel):
    token: str
    logprob: float
    bytes: list[int] | None


class TokenLogprobOut(TopLogprob):
    top_logprobs: list[TopLogprob]


class ChatLogprobs(BaseModel):
    content: list[TokenLogprobOut] | None
    refusal: list[TokenLogprobOut] | None = None


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str | None
    refusal: str | None = None
    tool_calls: list[ToolCallOut] | None = None


class ChatChoice(BaseModel):
    index: int
    message: AssistantMessage
    logprobs: ChatLogprobs | None
    finish_reason: FinishReason


class PromptTokensDetails(BaseModel):
    cached_tokens: int = Field(description="prompt tokens served from the prefix KV cache")


class CompletionUsage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails
    model_calls: int | None = Field(None, description="engine calls behind the answer")
    routing_calls: int | None = Field(None, description="tool requests: menu decisions made")
    prefill_tokens: int | None = Field(None, description="prompt tokens the model ran over "
                                                         "(the rest came from the cache)")


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChatChoice]
    usage: CompletionUsage
    tool_routing: ToolRouting | None = Field(None, description="tool requests: the routing")


class CompletionLogprobs(BaseModel):
    tokens: list[str]
    token_logprobs: list[float]
    top_logprobs: list[dict[str, float]] | None
    text_offset: list[int]


class CompletionChoice(BaseModel):
    index: int
    text: str
    logprobs: CompletionLogprobs | None
    finish_reason: FinishReason


class Completion(BaseModel):
    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: CompletionUsage


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "stackroute"
    max_model_len: int = Field(description="the model's context window, tokens")


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]
