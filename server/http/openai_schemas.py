"""Request and response bodies of the OpenAI-compatible API (pydantic: the HTTP edge).

Requests forbid unknown fields: a field this server does not implement is a 400 that names it
(see `errors.py`), never silently ignored. Fields are those of OpenAI's chat and legacy
completions APIs, plus vLLM's `structured_outputs`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

_STRICT = ConfigDict(extra="forbid")
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
    role: Literal["system", "developer", "user", "assistant"] = Field(
        description="'developer' is read as 'system'")
    content: str | list[TextPart] = Field(description="text, or text parts joined by newlines")


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
    top_p: float | None = Field(None, description="only 1.0 is supported")
    n: int | None = Field(None, description="only 1 is supported")
    stop: str | list[str] | None = Field(None, description="cut the answer before these")
    seed: int | None = Field(None, ge=0, le=2**63 - 1)
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    frequency_penalty: float | None = Field(None, description="only 0 is supported")
    presence_penalty: float | None = Field(None, description="only 0 is supported")
    user: str | None = Field(None, description="an end-user id; recorded nowhere")
    structured_outputs: StructuredOutputs | None = None
    response_format: ResponseFormat | None = None


class ChatCompletionRequest(_SamplingFields):
    messages: list[ChatMessage] = Field(min_length=1)
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
FinishReason = Literal["stop", "length"]


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
    content: str
    refusal: str | None = None


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


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChatChoice]
    usage: CompletionUsage


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
