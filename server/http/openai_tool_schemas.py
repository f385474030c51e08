"""The tool-calling parts of OpenAI's chat API (pydantic: the HTTP edge): the `tools` a
request offers, its `tool_choice`, the `tool_calls` an assistant message carries (in a
request's history and in a response), and the `tool` messages that hand results back.

Request models allow unknown fields: the endpoint names them (`openai_leniency.py`), warns
and ignores them, or refuses them when the server runs with `strict_openai`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

LENIENT = ConfigDict(extra="allow")  # unknown fields: collected by openai_leniency.py


class FunctionDefinition(BaseModel):
    model_config = LENIENT
    name: str = Field(min_length=1, max_length=256)
    description: str | None = None
    parameters: dict[str, Any] | None = Field(None, description="a JSON schema (an object)")
    strict: bool | None = Field(None, description="accepted; arguments always follow the "
                                                  "schema")


class ToolDefinition(BaseModel):
    model_config = LENIENT
    type: Literal["function"] = "function"
    function: FunctionDefinition


class NamedFunction(BaseModel):
    model_config = LENIENT
    name: str


class NamedToolChoice(BaseModel):
    """`{"type": "function", "function": {"name": …}}`: call this function; only its
    arguments are generated (no routing)."""

    model_config = LENIENT
    type: Literal["function"] = "function"
    function: NamedFunction


ToolChoiceMode = Literal["auto", "required", "none"]
ToolChoice = ToolChoiceMode | NamedToolChoice


class FunctionCall(BaseModel):
    model_config = LENIENT
    name: str
    arguments: str = Field(description="the arguments as JSON text")


class ToolCall(BaseModel):
    model_config = LENIENT
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


# -- response side (no extras: we write them) -------------------------------------------------
class ToolCallOut(BaseModel):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class DeclinedOut(BaseModel):
    """Why the answer makes no call: the abstention check (`abstain`) judged that the tool
    the router was about to call does not do what the request asks."""

    function: str = Field(description="the tool the router would have called")
    path: str = Field(description="its leaf's path in the tree")
    fit: float = Field(description="the check's fit for that call")
    threshold: float | None = Field(description="the bar the fit fell below")


class ToolRouting(BaseModel):
    """What routing the request through the tools' tree did (a stackroute extension)."""

    catalog: str = Field(description="the catalog id the tools list became (content hash)")
    is_catalog_cached: bool = Field(description="the catalog was built by an earlier request")
    catalog_build_ms: float = Field(description="time spent building it for this request")
    num_tools: int
    run_id: str | None = Field(None, description="the routing run; a tool_call id names it")
    outcome: str = Field(description="'tool_call', 'no_call', 'limit', or 'values_needed' "
                         "(the answer asks for values the request did not hold)")
    path: str | None = Field(None, description="the called leaf's path in the tree")
    written_values: list[str] = Field(
        default_factory=list, description="the call's arguments the model wrote under the "
        "schema instead of taking them from the request: not the user's words")
    missing_values: list[str] = Field(
        default_factory=list, description="values_needed: the required values the request "
        "did not hold, which the answer asks for (reply with them: the reply is routed with "
        "the request it completes)")
    declined: DeclinedOut | None = Field(
        None, description="no_call because the abstention check judged the request out of "
        "scope: the tool it stopped, and why")
