"""A run state sent by a client (`/v1/route`'s `state`), checked before the runtime reads it.

The state is the client's input, so every way it can be wrong is a 400 naming the field:
a wrong type anywhere (checked against the shape below, field by field), nesting deeper than
`MAX_STATE_DEPTH` (which would otherwise end in a `RecursionError` while it is read or
written back), or frames that do not form a stack of the catalog's routers.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError
from stackroute.runtime.errors import InputError
from stackroute.runtime.state import RunState
from stackroute.runtime.tree import CapabilityTree

MAX_STATE_DEPTH = 64  # JSON containers inside one another; real states nest about 8 deep


class StateInputError(InputError):
    """A client's `state` that is not a run state this catalog can continue."""

    http_status = 400

    def __init__(self, message: str, *, param: str = "state") -> None:
        self.param = param
        super().__init__(message)


class _Shape(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class _MessageShape(_Shape):
    role: str
    content: str


class _RefusedShape(_Shape):
    leaf: str
    arguments: dict[str, Any]
    properties: list[str]


class _FrameShape(_Shape):
    frame_id: int
    node_path: str
    parent_id: int | None
    turns: list[_MessageShape]
    accumulator: list[dict[str, Any]]
    num_iterations: int
    history: list[str]
    tried: list[str]
    is_alerted: bool
    shortlist: list[str] | None = None  # the options a shortlisted frame shows
    refused: list[_RefusedShape] = []  # arguments a leaf's schema refused in this frame


class _PendingShape(_Shape):
    kind: str
    path: str
    arguments: dict[str, Any]
    call_id: str
    frame_id: int
    is_gated: bool
    digest: str
    written_values: list[str] = []  # arguments not taken from the request
    missing_values: list[str] = []  # required values still asked of the user
    supplied_values: list[str] = []  # the values the user gave for them


class _LimitsShape(_Shape):
    max_steps: int | None = None
    max_iterations: int | None = None
    max_depth: int | None = None
    max_branch_switches: int | None = None
    exclude_tried: bool | None = None
    max_result_chars: int | None = None


# `runtime.usage.Usage`'s fields as a pydantic model, in one place: the routing API's `usage`
# (http/routing_schemas.UsageModel) and a sent state's usage, checked strictly, both take it.
# (A comment, not a docstring: a docstring would become the OpenAPI schema's description.)
class UsageFields(BaseModel):
    model_calls: int = 0
    prompt_tokens: int = 0
    prefill_tokens: int = 0
    cached_tokens: int = 0
    generated_tokens: int = 0
    forward_passes: int = 0
    speculated_levels: int = 0
    accepted_levels: int = 0
    latency_ms: float = 0.0


class _UsageShape(UsageFields):
    model_config = ConfigDict(extra="ignore", strict=True)  # older states: fewer, newer: more


class _StateShape(_Shape):
    version: int
    run_id: str
    catalog: str
    conversation: list[_MessageShape]
    limits: _LimitsShape
    is_flat: bool = False
    stack: list[_FrameShape]
    pending: _PendingShape | None
    status: str
    num_steps: int
    num_calls: int
    num_format_failures: int
    next_frame_id: int
    trace: list[dict[str, Any]]
    calls: list[dict[str, Any]]
    result: list[dict[str, Any]] | None = None
    usage: _UsageShape
    error: str | None = None


def parse_state(data: Any) -> RunState:
    """The run state in `data`, or `StateInputError` naming the first field at fault."""
    depth = _depth(data)
    if depth > MAX_STATE_DEPTH:
        raise StateInputError(f"`state` nests {depth} levels deep; the limit is "
                              f"{MAX_STATE_DEPTH}")
    try:
        _StateShape.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(["state", *(str(p) for p in first["loc"])])
        raise StateInputError(f"`{where}` is not valid: {first['msg']}", param=where) from None
    try:
        return RunState.from_dict(data)
    except (InputError, KeyError, TypeError, ValueError) as e:  # enum values, limits, version
        raise StateInputError(f"`state` is not a serialised run state: {type(e).__name__}: "
                              f"{e}") from None


def check_frames(run: RunState, tree: CapabilityTree) -> None:
    """The state's frames must be a stack of `tree`'s routers, each the parent of the next,
    and a pending call must belong to a frame on it."""
    if not run.stack:
        raise StateInputError("the state has no frames on its stack", param="state.stack")
    parent_id: int | None = None
    for i, frame in enumerate(run.stack):
        node = tree.get(frame.node_path)
        if node is None or node.is_leaf:
            raise StateInputError(f"the state has a frame at {frame.node_path!r}, which is not "
                                  f"a router of catalog {tree.name!r}",
                                  param=f"state.stack.{i}.node_path")
        if frame.parent_id != parent_id:
            raise StateInputError(f"frame {i} names parent {frame.parent_id}, but the frame "
                                  f"below it is {parent_id}", param=f"state.stack.{i}.parent_id")
        parent_id = frame.frame_id
    if run.pending is not None and all(f.frame_id != run.pending.frame_id for f in run.stack):
        raise StateInputError(f"the pending call's frame {run.pending.frame_id} is not on the "
                              "stack", param="state.pending.frame_id")


def _depth(value: Any) -> int:
    """How deeply JSON containers nest in `value`, without recursion."""
    deepest = 0
    todo: list[tuple[Any, int]] = [(value, 1)]
    while todo:
        item, level = todo.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, level)
        if deepest > MAX_STATE_DEPTH:
            return deepest
        todo.extend((child, level + 1) for child in children)
    return deepest
