"""Request and response bodies of the routing API (`server/http/api_routing.py`): what the OpenAPI
schema shows, so every field has its type, bounds and a description where the name is not
enough."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from stackroute.runtime.governance import RunStatus
from stackroute.server.service.run_state_input import UsageFields


class UsageModel(UsageFields):
    pass


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["system", "user", "assistant"]
    content: str


class RouteRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    catalog: str = Field(description="catalog id")
    node: str = Field("", description="router path to decide at ('' is the root)")
    query: str | None = Field(None, min_length=1, description="the request")
    messages: list[ChatMessage] | None = Field(
        None, min_length=1, description="the conversation instead of `query`: its user "
                                        "messages, joined by newlines, are the request")
    state: dict[str, Any] | None = Field(
        None, description="a serialised run state (from a session or a previous call) to "
                          "make the next routing call from, instead of node and query")
    flat: bool = Field(False, description="the flat baseline: every leaf in one menu")
    include_state: bool = Field(False, description="return the run state after the call "
                                                   "(always returned when `state` is given)")


class RouteResponse(BaseModel):
    decision: str = Field(description="the chosen menu option: a child name, DONE or BACK")
    node: str = Field(description="the router the decision was made at")
    menu: list[str]
    probabilities: dict[str, float]
    is_leaf: bool = Field(description="the decision is a leaf (it carries arguments)")
    arguments: dict[str, Any] | None = Field(None, description="a leaf's arguments")
    written_values: list[str] = Field(
        default_factory=list, description="a leaf's arguments the model wrote under the schema "
        "instead of taking them from the request (missing_values: write)")
    missing_values: list[str] = Field(
        default_factory=list, description="a leaf's required values the request did not hold, "
        "left out of `arguments` for the user to give (missing_values: ask, the default)")
    misstep: str | None = Field(None, description="why the answer was rejected, if it was")
    usage: UsageModel
    state: dict[str, Any] | None = None
    routing: dict[str, str | None] = Field(
        default_factory=dict, description="how the server routed: policy (plain | guided), "
        "calibration (the file the guided policy read) and speculation (in effect)")


class LimitsModel(BaseModel):
    """Per-session limits (runtime `Limits`); omitted fields keep their defaults."""

    model_config = ConfigDict(extra="forbid")
    max_steps: int | None = Field(None, ge=1, description="routing calls in the whole run")
    max_iterations: int | None = Field(None, ge=1, description="routing calls in one frame")
    max_depth: int | None = Field(None, ge=1, description="frames on the stack")
    max_branch_switches: int | None = Field(None, ge=1)
    exclude_tried: bool | None = None
    max_result_chars: int | None = Field(None, ge=1)


class CreateSessionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    catalog: str = Field(description="catalog id")
    task: str = Field(min_length=1)
    limits: LimitsModel | None = None
    flat: bool = False
    auto_approve: bool = Field(False, description="approve every confirmation gate")


class GateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    digest: str = Field(description="the pending call's digest, as shown by GET session")


class ToolResultRequest(GateRequest):
    """The outcome of the gated call, run by the client itself (a client-executed tool)."""

    result: Any = Field(None, description="what the call returned (any JSON)")
    error: str | None = Field(None, description="why the call failed, instead of a result")


class ValuesRequest(GateRequest):
    """The user's values for the call waiting for them (the pending call's `missing_values`):
    exactly those names, each fitting the leaf's schema (the pending call's `values_schema`)."""

    values: dict[str, Any] = Field(
        description="one value per missing name, e.g. {\"amount\": 500}",
        json_schema_extra={"examples": [{"amount": 500}]})

    @field_validator("values", mode="before")
    @classmethod
    def _an_object(cls, value: Any) -> Any:
        if not isinstance(value, dict):  # a null must not arrive as "no values" (a reject)
            raise ValueError("expected a JSON object naming each missing value, got "
                             f"{_json_kind(value)}")
        return value


def _json_kind(value: Any) -> str:
    """The JSON name of `value`'s type, as a client wrote it."""
    kinds = ((type(None), "null"), (bool, "a boolean"), (int, "a number"), (float, "a number"),
             (str, "a string"), (list, "an array"))
    return next((name for cls, name in kinds if isinstance(value, cls)), type(value).__name__)


class PendingCallModel(BaseModel):
    path: str
    arguments: dict[str, Any]
    arguments_text: str = Field(
        "", description="the arguments as indented JSON with every invisible or "
        "direction-changing character (bidi overrides, zero-width, controls) written as a "
        "\\uXXXX escape: what a person should read before approving (shown_text.py)")
    call_id: str = Field(description="idempotency key of the leaf call")
    digest: str = Field(description="binds an approval to exactly this call")
    is_gated: bool = Field(description="waits for approve or reject")
    written_values: list[str] = Field(
        default_factory=list, description="required arguments the model wrote under the "
        "schema instead of taking them from the request (it held no value for them, or the "
        "engine would not choose one): not the user's words; read them before approving")
    missing_values: list[str] = Field(
        default_factory=list, description="required arguments the request held no value for: "
        "the call waits for the user to give them (POST /v1/sessions/{id}/values, shaped by "
        "`values_schema`); it cannot be approved until then, only rejected")
    supplied_values: list[str] = Field(
        default_factory=list, description="arguments the user gave after the call asked")
    values_schema: dict[str, Any] | None = Field(
        None, description="the JSON schema of the answer to `missing_values`: an object with "
        "exactly those properties, all required (null when nothing is missing)")


class FrameModel(BaseModel):
    frame_id: int
    node_path: str
    parent_id: int | None
    num_iterations: int
    history: list[str]
    tried: list[str]
    accumulator: list[dict[str, Any]]


class SessionSummary(BaseModel):
    id: str
    catalog: str
    status: RunStatus
    task: str
    flat: bool
    auto_approve: bool
    created_unix: float
    updated_unix: float


class SessionView(SessionSummary):
    num_steps: int
    num_format_failures: int
    pending: PendingCallModel | None
    stack: list[FrameModel]
    calls: list[dict[str, Any]]
    result: list[dict[str, Any]] | None
    error: str | None
    usage: UsageModel
    trace: list[dict[str, Any]]
    state: dict[str, Any] | None = Field(None, description="the whole run state, when asked")


class SessionList(BaseModel):
    sessions: list[SessionSummary]


class CompileStats(BaseModel):
    num_menus: int
    num_schemas: int
    compile_ms: float


class TreeStatsModel(BaseModel):
    num_leaves: int
    num_routers: int
    depth: int
    max_menu: int
    largest_menu_path: str
    branching_by_level: list[dict[str, float]]


class CatalogInfo(BaseModel):
    id: str
    name: str
    description: str
    format: Literal["json", "yaml"]
    created_unix: float
    stats: TreeStatsModel
    compile: CompileStats


class CatalogCreated(CatalogInfo):
    is_new: bool = Field(description="false when the same catalog was already loaded")


class CatalogList(BaseModel):
    catalogs: list[CatalogInfo]
