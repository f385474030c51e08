"""The capability tree as an MCP server (the SDK's `MCPServer`), in two modes:

- `route`: one `route` tool (a request in, the routed call's result out). A call that waits at
  a confirmation gate is put to the user as MCP elicitation where the client supports it;
  otherwise the answer is `{"status": "paused", "id", "pending"}` and `approve(id)` runs it.
  A call that waits for values the request did not give (`pending.missing_values`) is asked
  of the user the same way where every missing value is a primitive a form can hold
  (elicit_values.py); otherwise `supply_values(id, values)` answers it.
- `discover`: lazy-discovery meta-tools: `list_children(path)`, `describe_leaf(path)`,
  `call_leaf(path, arguments, call_id?)`, so the client's own model walks the tree; a
  sensitive leaf pauses the same way.

Both keep the service's guarantees: routed calls are sessions, and direct leaf calls go
through the same recorded executor, so no call recorded as begun is sent twice.
"""

from __future__ import annotations

import functools
from enum import StrEnum
from typing import Any

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field
from stackroute.runtime.errors import StackrouteError
from stackroute.server.mcp.elicit_values import requested_schema, values_message
from stackroute.server.mcp.gateway import McpGateway

MAX_ROUTE_WAIT_S = 300.0  # a route call answers `running` (poll with `result`) after this


class Mode(StrEnum):
    ROUTE = "route"
    DISCOVER = "discover"
    BOTH = "both"


class Approval(BaseModel):
    """What an elicitation asks the user (a flat, primitive schema as MCP requires)."""

    approve: bool = Field(description="run this call")


INSTRUCTIONS = (
    "stackroute: a gateway to many tools arranged as a capability tree. {how}")
ROUTE_HOW = ("Call `route` with the user's request in plain words; it picks and calls the "
             "right tool and returns its result.")
DISCOVER_HOW = ("Walk the tree: `list_children` from path '' (the root), `describe_leaf` for "
                "a tool's parameters, then `call_leaf`.")


def build_server(gateway: McpGateway, *, mode: Mode = Mode.ROUTE,
                 max_wait_s: float = MAX_ROUTE_WAIT_S) -> MCPServer[Any]:
    """The `MCPServer` exposing `gateway` in `mode`; a routed request still running after
    `max_wait_s` is answered `running` (its id polls with `result`)."""
    how = {Mode.ROUTE: ROUTE_HOW, Mode.DISCOVER: DISCOVER_HOW,
           Mode.BOTH: f"{ROUTE_HOW} Or: {DISCOVER_HOW}"}[mode]
    server: MCPServer[Any] = MCPServer("stackroute", instructions=INSTRUCTIONS.format(how=how),
                            log_level="WARNING")

    async def sync(fn: Any, *args: Any, **kwargs: Any) -> Any:
        """`fn` on a worker thread; our typed errors (bad input, a call not waiting) reach
        the client with their words (anything else is a crash the SDK hides)."""
        try:
            return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))
        except StackrouteError as e:
            raise ToolError(str(e)) from e

    async def confirm(ctx: Context, message: str) -> bool | None:
        """The user's answer through elicitation; None where the client cannot elicit."""
        if not can_elicit(ctx):
            return None
        answer = await ctx.elicit(message, schema=Approval)
        return answer.action == "accept" and bool(answer.data.approve)

    def can_elicit(ctx: Context) -> bool:
        capabilities = ctx.client_capabilities
        return capabilities is not None and capabilities.elicitation is not None

    async def ask_values(ctx: Context, session_id: str,
                         view: dict[str, Any]) -> dict[str, Any] | None:
        """The values the paused call waits for, asked of the user through elicitation: on
        accept they are supplied, on decline the call is rejected (None: routing goes on); on
        cancel, where the client cannot elicit, or the values are not all primitives a form
        holds, the call still waits and `view` is the answer (with why a refused answer was
        refused)."""
        pending = view["pending"]
        form = requested_schema(pending.get("values_schema"))
        if form is None or not can_elicit(ctx):
            return view
        answer = await ctx.session.elicit_form(message=values_message(pending),
                                               requested_schema=form,
                                               related_request_id=ctx.request_id)
        if answer.action == "cancel":
            return view
        try:
            if answer.action == "accept":
                await sync(gateway.supply, session_id, dict(answer.content or {}))
            else:
                await sync(gateway.decide, session_id, is_approved=False)
        except ToolError as e:  # a value that fails the leaf's schema: the call still waits
            view = await sync(gateway.wait, session_id, max_wait_s=0.0)
            view["message"] = f"the values given were refused: {e}. {view.get('message', '')}"
            return view
        return None

    async def settle_session(ctx: Context, session_id: str) -> dict[str, Any]:
        view = await sync(gateway.wait, session_id, max_wait_s=max_wait_s)
        while view["status"] == "paused":
            pending = view["pending"]
            if pending.get("missing_values"):
                unanswered = await ask_values(ctx, session_id, view)
                if unanswered is not None:
                    return unanswered
                view = await sync(gateway.wait, session_id, max_wait_s=max_wait_s)
                continue
            written = pending.get("written_values")
            note = (" Written by the model, not taken from the request: " + ", ".join(written)
                    if written else "")
            decision = await confirm(ctx, f"Run {pending['path']} with "
                                          f"{pending['arguments']}?{note}")
            if decision is None:
                return view
            await sync(gateway.decide, session_id, is_approved=decision)
            view = await sync(gateway.wait, session_id, max_wait_s=max_wait_s)
        return view

    if mode in (Mode.ROUTE, Mode.BOTH):
        @server.tool(description="Route a request to the right tool and call it. Returns "
                                 "the calls made and their results (or a call waiting for "
                                 "approval).")
        async def route(request: str, ctx: Context, catalog: str | None = None,
                        ) -> dict[str, Any]:
            session_id = await sync(gateway.start_route, request, catalog)
            return await settle_session(ctx, session_id)

        @server.tool(description="The state of a routed request by its id (after a "
                                 "'running' answer or a reconnect).")
        async def result(id: str) -> dict[str, Any]:
            return await sync(gateway.wait, id, max_wait_s=0.0)

        @server.tool(description="Give a routed call the values it waits for (the ones its "
                                 "request did not say), by the id its paused answer gave: "
                                 "values is an object with exactly pending.missing_values, "
                                 "matching pending.values_schema.")
        async def supply_values(id: str, values: dict[str, Any], ctx: Context,
                                ) -> dict[str, Any]:
            await sync(gateway.supply, id, values)
            return await settle_session(ctx, id)

    if mode in (Mode.DISCOVER, Mode.BOTH):
        @server.tool(description="The children of a node of the tool tree ('' is the "
                                 "root): routers to descend into, leaves to call.")
        async def list_children(path: str = "", catalog: str | None = None,
                                ) -> dict[str, Any]:
            return await sync(gateway.children, path, catalog)

        @server.tool(description="A leaf's description and JSON-schema parameters.")
        async def describe_leaf(path: str, catalog: str | None = None) -> dict[str, Any]:
            return await sync(gateway.describe, path, catalog)

        @server.tool(description="Call a leaf with arguments matching its parameters. "
                                 "call_id (optional) makes a retry safe: the same id is "
                                 "never run twice.")
        async def call_leaf(path: str, ctx: Context, arguments: dict[str, Any] | None = None,
                            call_id: str | None = None, catalog: str | None = None,
                            ) -> dict[str, Any]:
            call = await sync(gateway.start_call, path, arguments or {}, call_id=call_id,
                              catalog=catalog)
            _, tree = await sync(gateway.tree, catalog)
            if tree.node(call.path).sensitive:
                decision = await confirm(ctx, f"Run {path} with {call.arguments}?")
                if decision is None:
                    return {"status": "paused", "id": gateway.hold(call),
                            "pending": {"path": path, "arguments": call.arguments},
                            "message": "this call waits for approval: call `approve` with "
                                       "this id (approve=false rejects it)"}
                if not decision:
                    return {"status": "rejected", "path": path}
            return await sync(gateway.run_call, call)

    @server.tool(name="approve",
                 description="Approve (or, with approve=false, reject) a call that waits "
                             "for approval, by the id its paused answer gave.")
    async def approve_tool(id: str, ctx: Context, approve: bool = True,
                      ) -> dict[str, Any]:
        held = gateway.take_pending(id)
        if held is not None:
            if not approve:
                return {"status": "rejected", "path": held.path}
            return await sync(gateway.run_call, held)
        await sync(gateway.decide, id, is_approved=approve)
        return await settle_session(ctx, id)

    return server
