"""The gateway's state behind both MCP transports: the MCP connections, the handler table with
the `mcp` kind, which catalog is current under each name (re-imported from its servers at
load and on `notifications/tools/list_changed`), and the operations the MCP tools expose
(route a request as a session; list, describe and call leaves; approve; supply the values a
routed call waits for).

Only catalog *files* the operator names may start or reach MCP servers (their `mcp_servers`
field); a catalog uploaded over the API can only name servers those files configured.
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stackroute.runtime.catalog import catalog_format, parse_catalog_document
from stackroute.runtime.errors import CatalogError, InputError, StackrouteError, StateError
from stackroute.runtime.governance import RunStatus
from stackroute.runtime.handlers import HandlerTable
from stackroute.runtime.missing_values import values_schema
from stackroute.runtime.schemas import argument_errors
from stackroute.runtime.tree import CapabilityTree, Node
from stackroute.server.mcp.config import CATALOG_FIELD
from stackroute.server.mcp.connections import McpConnections
from stackroute.server.mcp.forward import McpForwarding
from stackroute.server.mcp.importer import ImportOptions, catalog_servers, refreshed_catalog
from stackroute.server.routing.abstention import declined

if TYPE_CHECKING:
    from stackroute.server.service.services import Services

log = logging.getLogger(__name__)
POLL_S = 0.05  # how often a waiting tool re-reads its session


class UnknownPendingError(InputError):
    code = "unknown_pending"
    http_status = 404


@dataclass(frozen=True)
class PendingLeafCall:
    """A `call_leaf` of a sensitive leaf, waiting for `approve` (in memory: a crash forgets
    it, and nothing was sent)."""

    catalog_id: str
    path: str
    arguments: dict[str, Any]
    call_id: str


class McpGateway:
    def __init__(self, *, timeout_s: float, embedder: Any | None = None) -> None:
        self.connections = McpConnections(default_timeout_s=timeout_s,
                                          on_tools_changed=self._on_tools_changed)
        self.forwarding = McpForwarding(self.connections, timeout_s=timeout_s)
        self.embedder = embedder  # build-tree below wide servers on a re-import
        self.services: Services | None = None
        self._documents: dict[str, dict[str, Any]] = {}  # catalog name -> MCP document
        self._current: dict[str, str] = {}  # catalog name -> id now served
        self._pending: dict[str, PendingLeafCall] = {}
        self._lock = threading.Lock()
        self._refresher = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="mcp-refresh")

    # -- set-up ------------------------------------------------------------------------------
    def handlers(self, allowed_modules: Iterable[str] = ()) -> HandlerTable:
        """The service's handler table: import paths as configured, plus the `mcp` kind."""
        return HandlerTable(allowed_modules=allowed_modules, resolvers=[self.forwarding])

    def register_files(self, paths: Iterable[str | Path]) -> None:
        """Configure the MCP servers the catalog files name (before the service loads them)."""
        for path in paths:
            p = Path(path)
            try:
                document = parse_catalog_document(p.read_text(encoding="utf-8"),
                                                  fmt=catalog_format(p))
            except (OSError, UnicodeDecodeError, CatalogError):
                continue  # the registry reports it when it loads the file
            if not isinstance(document, Mapping):
                continue
            servers = catalog_servers(document)
            for config in servers:
                self.connections.add(config)
            if servers:
                with self._lock:
                    self._documents[str(document["name"])] = dict(document)

    def attach(self, services: Services, *, is_refreshed: bool = True) -> None:
        """Serve `services`' catalogs; re-import the MCP ones from their live servers."""
        self.services = services
        for entry in services.catalogs.entries():
            with self._lock:
                self._current.setdefault(entry.name, entry.id)
        if is_refreshed:
            for name in list(self._documents):
                try:
                    self.refresh_catalog(name)
                except StackrouteError as e:  # a server down at start: serve the file's tools
                    log.warning("MCP catalog %s: not re-imported (%s); serving it as the "
                                "file has it", name, e)

    def close(self) -> None:
        self._refresher.shutdown(wait=False, cancel_futures=True)
        self.connections.close()

    # -- keeping current ---------------------------------------------------------------------
    def _on_tools_changed(self, server: str) -> None:  # on the MCP client's loop thread
        log.info("MCP server %s: tools/list changed; re-importing", server)
        self._refresher.submit(self.refresh_server, server)

    def refresh_server(self, server: str) -> None:
        with self._lock:
            names = [n for n, d in self._documents.items() if server in d.get(CATALOG_FIELD, {})]
        for name in names:
            self.refresh_catalog(name)

    def refresh_catalog(self, name: str) -> str:
        """Re-read the tools of catalog `name`'s servers and serve the rebuilt catalog (a new
        id when anything changed); return the id now served."""
        services = self._services()
        with self._lock:
            document = self._documents[name]
        tools = {c.name: self.connections.list_tools(c.name) for c in catalog_servers(document)}
        max_flat = ImportOptions.from_dict(document.get("mcp_import")).max_flat
        if self.embedder is None and max(map(len, tools.values()), default=0) > max_flat:
            from stackroute.server.embeddings.vector_cache import CachedEmbedder

            self.embedder = CachedEmbedder.for_default_model()  # build-tree for a wide server
        rebuilt = refreshed_catalog(document, tools, embedder=self.embedder)
        entry, is_new = services.catalogs.add_text(json.dumps(rebuilt, ensure_ascii=False))
        with self._lock:
            self._documents[name] = rebuilt
            self._current[name] = entry.id
        if is_new:
            log.info("MCP catalog %s now %s (%d leaves)", name, entry.id,
                     sum(1 for _ in entry.tree.leaves()))
        return entry.id

    # -- what the MCP tools do ---------------------------------------------------------------
    def catalog_names(self) -> list[str]:
        with self._lock:
            return list(self._current)

    def tree(self, catalog: str | None = None) -> tuple[str, CapabilityTree]:
        catalog_id = self._catalog_id(catalog)
        return catalog_id, self._services().catalogs.get(catalog_id).tree

    def children(self, path: str = "", catalog: str | None = None) -> dict[str, Any]:
        _, tree = self.tree(catalog)
        node = self._node(tree, path)
        if node.is_leaf:
            raise InputError(f"{node.path_str or path!r} is a leaf; describe_leaf or "
                             "call_leaf it")
        return {"path": _path(node), "description": node.description,
                "children": [{"name": c.name, "kind": "leaf" if c.is_leaf else "router",
                              "description": c.description,
                              **({"sensitive": True} if c.sensitive else {})}
                             for c in node.children]}

    def describe(self, path: str, catalog: str | None = None) -> dict[str, Any]:
        _, tree = self.tree(catalog)
        leaf = self._leaf(tree, path)
        return {"path": _path(leaf), "description": leaf.description,
                "parameters": leaf.parameters or {"type": "object"},
                "sensitive": leaf.sensitive}

    def start_call(self, path: str, arguments: Mapping[str, Any], *,
                   call_id: str | None = None, catalog: str | None = None,
                   ) -> PendingLeafCall:
        """Validate a direct leaf call; the caller runs it or waits for approval."""
        catalog_id, tree = self.tree(catalog)
        leaf = self._leaf(tree, path)
        errors = argument_errors(leaf.parameters, dict(arguments))
        if errors:
            raise InputError(f"arguments of {_path(leaf)} do not match its schema: "
                             + "; ".join(errors))
        key = call_id or uuid.uuid4().hex
        return PendingLeafCall(catalog_id=catalog_id, path=leaf.path_str,
                               arguments=dict(arguments), call_id=f"mcp-call:{key}")

    def hold(self, call: PendingLeafCall) -> str:
        pending_id = f"call-{uuid.uuid4().hex[:16]}"
        with self._lock:
            self._pending[pending_id] = call
        return pending_id

    def take_pending(self, pending_id: str) -> PendingLeafCall | None:
        with self._lock:
            return self._pending.pop(pending_id, None)

    def run_call(self, call: PendingLeafCall) -> dict[str, Any]:
        """Run a leaf call through the service's recorded executor: begun before it is sent,
        its outcome after; a call id met again answers its record, never a second send."""
        services = self._services()
        leaf = services.catalogs.get(call.catalog_id).tree.node(call.path)
        outcome = services.sessions.executor.execute(leaf, call.arguments, call.call_id)
        out: dict[str, Any] = {"status": "error" if outcome.error else "done",
                               "path": _path(leaf), "call_id": call.call_id}
        if outcome.error:
            out["error"] = outcome.error
        else:
            out["result"] = outcome.result
        if outcome.is_replayed:
            out["is_replayed"] = True
        return out

    def start_route(self, request: str, catalog: str | None = None) -> str:
        return self._services().sessions.create(self._catalog_id(catalog), request).row.id

    def wait(self, session_id: str, *, max_wait_s: float) -> dict[str, Any]:
        """The session once it is no longer running (or as it is after `max_wait_s`)."""
        deadline = time.monotonic() + max_wait_s
        while True:
            record = self._services().sessions.get(session_id)
            if record.state.status is not RunStatus.RUNNING or time.monotonic() > deadline:
                return session_view(session_id, record.state,
                                    asked=self._asked(record.row.catalog_id, record.state))
            time.sleep(POLL_S)

    def decide(self, session_id: str, *, is_approved: bool) -> None:
        sessions = self._services().sessions
        state = sessions.get(session_id).state
        if state.status is not RunStatus.PAUSED or state.pending is None:
            raise StateError(f"session {session_id} is {state.status.value}, not waiting for "
                             "approval")
        if is_approved and state.pending.is_waiting_for_values:
            raise StateError(f"session {session_id}: {state.pending.path} waits for values "
                             f"({', '.join(state.pending.missing_values)}), not for approval; "
                             "call `supply_values` with them (approve=false rejects the call)")
        if is_approved:
            sessions.approve(session_id, state.pending.digest)
        else:
            sessions.reject(session_id, state.pending.digest)

    def supply(self, session_id: str, values: Any) -> None:
        """Give the routed call that waits for values exactly those (`Sessions.supply`): it
        then runs, or waits at its gate. Wrong values are an InputError; the call still
        waits."""
        sessions = self._services().sessions
        state = sessions.get(session_id).state
        pending = state.pending
        if state.status is not RunStatus.PAUSED or pending is None:
            raise StateError(f"session {session_id} is {state.status.value}, not waiting for "
                             "values")
        if not pending.is_waiting_for_values:
            raise StateError(f"session {session_id}: {pending.path} waits for approval, not "
                             "for values; call `approve` (approve=false rejects it)")
        sessions.supply(session_id, pending.digest, values)

    # -- helpers -----------------------------------------------------------------------------
    def _asked(self, catalog_id: str, state: Any) -> dict[str, Any] | None:
        """The JSON schema of the values a paused call waits for (None if it waits for none)."""
        pending = state.pending
        if pending is None or not pending.is_waiting_for_values:
            return None
        leaf = self._services().catalogs.get(catalog_id).tree.node(pending.path)
        return values_schema(leaf.parameters, pending.missing_values)

    def _services(self) -> Services:
        if self.services is None:
            raise StateError("the MCP gateway is not attached to a service yet")
        return self.services

    def _catalog_id(self, catalog: str | None) -> str:
        with self._lock:
            if catalog is None:
                if not self._current:
                    raise InputError("no catalog is loaded")
                return next(iter(self._current.values()))
            found = self._current.get(catalog)
            known = list(self._current)
        if found is None:
            raise InputError(f"unknown catalog {catalog!r}; expected one of {known}")
        return found

    @staticmethod
    def _node(tree: CapabilityTree, path: str) -> Node:
        """A node by its path below the root (`""` or `/`: the root)."""
        clean = path.strip().strip("/")
        node = tree.root if clean == "" else tree.get(clean)
        if node is None:
            raise InputError(f"no node {path!r} in catalog {tree.name!r}; list_children "
                             "shows the paths")
        return node

    def _leaf(self, tree: CapabilityTree, path: str) -> Node:
        node = self._node(tree, path)
        if not node.is_leaf:
            raise InputError(f"{path!r} is a router; list_children shows what is under it")
        return node


def _path(node: Node) -> str:
    return "/".join(node.path)


def session_view(session_id: str, state: Any, *,
                 asked: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What an MCP client gets back for a routed request; `asked`: the schema of the values a
    paused call waits for (`values_schema`), shown with it."""
    out: dict[str, Any] = {"status": state.status.value, "id": session_id,
                           "calls": state.calls}
    pending = state.pending
    if state.status is RunStatus.PAUSED and pending is not None:
        out["pending"] = {"path": pending.path, "arguments": pending.arguments,
                          **pending.provenance()}
        if pending.is_waiting_for_values:
            if asked is not None:
                out["pending"]["values_schema"] = dict(asked)
            out["message"] = supply_message(pending.missing_values)
        else:
            out["message"] = ("this call waits for approval: call `approve` with this id "
                              "(approve=false rejects it)")
    if state.status is RunStatus.RUNNING:
        out["message"] = "still routing: call `result` with this id for its state"
    stop = declined(state.trace) if not state.calls else None
    if stop is not None:
        out["declined"] = {"path": stop.leaf, "fit": stop.fit, "threshold": stop.threshold}
        out["message"] = (f"no call: no tool does what the request asks (the closest, "
                          f"{stop.leaf}, was judged not to fit it)")
    elif state.status is RunStatus.DONE and not state.calls:
        out["message"] = "no call: routing found no tool for the request"
    if state.error:
        out["error"] = state.error
    return out


def supply_message(missing: Iterable[str]) -> str:
    names = list(missing)
    example = "{" + ", ".join(f"{json.dumps(name)}: ..." for name in names) + "}"
    return (f"this call needs values the request did not give: {', '.join(names)}. Ask the "
            f"user, then call `supply_values` with this id and values={example} (an object "
            "matching pending.values_schema); `approve` with approve=false rejects the call")
