"""Leaf handlers: bound by the decorator or by import path, never by evaluating strings.

A running handler can read its call's identity with `current_call()`: the call id
(`run_id:n`, the same when a resumed run retries the call) is the idempotency key to hand to
whatever the tool changes downstream (a payment API's idempotency header, say). It is not an
argument, so the model's arguments can never set or spoof it.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import importlib
import inspect
import logging
import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from stackroute.runtime.errors import HandlerError, Problem
from stackroute.runtime.tree import CapabilityTree, Node

log = logging.getLogger(__name__)
Handler = Callable[..., Any]


@dataclass(frozen=True)
class LeafOutcome:
    result: Any = None
    error: str | None = None
    is_replayed: bool = False  # the executor had already run this call id


@dataclass(frozen=True)
class CallContext:
    call_id: str  # the run's idempotency key for this call: f"{run_id}:{n}"
    leaf_path: str


_CURRENT_CALL: contextvars.ContextVar[CallContext | None] = contextvars.ContextVar(
    "stackroute_current_call", default=None)


def current_call() -> CallContext:
    """The call the running handler serves; raises `HandlerError` outside a handler."""
    context = _CURRENT_CALL.get()
    if context is None:
        raise HandlerError("current_call() is only available inside a running leaf handler")
    return context


def run_with_call_context(context: CallContext, handler: Handler,
                          arguments: Mapping[str, Any]) -> Any:
    """Call `handler(**arguments)` with `current_call()` answering `context`."""
    scope = contextvars.copy_context()
    scope.run(_CURRENT_CALL.set, context)
    return scope.run(handler, **arguments)


def resolve_call(handlers: HandlerTable, leaf: Node,
                 arguments: Mapping[str, Any]) -> Handler | LeafOutcome:
    """The handler to run for `leaf`, or the outcome that needs none: the resolution error, or
    the validated arguments of a leaf without a handler (routing-only catalogs)."""
    try:
        handler = handlers.resolve(leaf)
    except HandlerError as e:
        return LeafOutcome(error=str(e))
    return LeafOutcome(result=dict(arguments)) if handler is None else handler


class LeafResolver(Protocol):
    """A handler kind keyed on the leaf itself (its metadata), not on an import path."""

    def serves(self, leaf: Node) -> bool:
        """Whether `leaf` is of this kind (then `resolve` answers for it)."""
        ...

    def resolve(self, leaf: Node) -> Handler:
        """The handler of `leaf`; `HandlerError` when it cannot have one."""
        ...


class Executor(Protocol):
    def execute(self, leaf: Node, arguments: Mapping[str, Any], call_id: str) -> LeafOutcome:
        ...


class HandlerTable:
    """Handlers by leaf path, plus import paths from catalogs restricted to an allowlist.

    `allowed_modules` holds exact module names ("acme.tools.billing": any function defined
    in it) or exact refs ("acme.tools.billing:send"). A package does not allow its
    submodules: checking a catalog imports only modules the operator listed, so an upload
    can never run the top-level code of another module (`acme.tools.scripts.wipe`,
    `acme.tools.__main__`). Whatever an allowed module's import raises (`SystemExit`
    included) is a problem of the leaf that named it, never an exception of the caller.
    """

    def __init__(self, bindings: Mapping[str, Handler] | None = None, *,
                 allowed_modules: Iterable[str] = (),
                 resolvers: Iterable[LeafResolver] = ()) -> None:
        self._bindings = dict(bindings or {})
        # Handler kinds other than import paths (the MCP gateway's `mcp` leaves): each
        # resolver answers the handler for the leaves it serves, None for the others. Their
        # handlers run in this process (they forward I/O; a worker process could not hold
        # their connections), whatever the executor's isolation.
        self.resolvers = tuple(resolvers)
        self.allowed_modules = tuple(allowed_modules)
        self._modules = frozenset(m for m in self.allowed_modules if ":" not in m)
        self._refs = frozenset(m for m in self.allowed_modules if ":" in m)
        self._imported: dict[str, Handler] = {}

    def bind(self, path: str, handler: Handler) -> None:
        self._bindings[path] = handler

    def is_allowed(self, module: str, attr: str | None = None) -> bool:
        """Whether `module` (or the ref `module:attr`) is on the allowlist, exactly."""
        return module in self._modules or (attr is not None and f"{module}:{attr}" in self._refs)

    def _is_within_allowed(self, module: str) -> bool:
        """`module` is an allowed module or inside one: where a handler may be *defined*
        (a function an allowed package re-exports from its own submodule). This imports
        nothing: only `is_allowed` modules are ever imported."""
        return any(module == m or module.startswith(m + ".") for m in self._modules)

    def resolve(self, leaf: Node) -> Handler | None:
        bound = self._bound(leaf)
        if bound is not None:
            return bound
        if leaf.handler is None:
            return self._resolved(leaf)
        return self._import(leaf.handler, leaf.path_str)

    def is_in_process(self, leaf: Node) -> bool:
        """Whether a resolver (not a binding or an import path) serves `leaf`: its handler
        must run in this process."""
        return (self._bound(leaf) is None and leaf.handler is None
                and any(r.serves(leaf) for r in self.resolvers))

    def _resolved(self, leaf: Node) -> Handler | None:
        for resolver in self.resolvers:
            if resolver.serves(leaf):
                return resolver.resolve(leaf)
        return None

    def import_ref(self, leaf: Node) -> str | None:
        """The `module:function` that `resolve` imports for `leaf` (None when a binding
        wins or there is no handler): another process can import the handler by it."""
        return leaf.handler if self._bound(leaf) is None else None

    def _bound(self, leaf: Node) -> Handler | None:
        bound = self._bindings.get(leaf.path_str)
        tree_path = leaf.metadata.get("tree_path")  # a flat baseline leaf keeps its tree path
        if bound is None and isinstance(tree_path, str):
            bound = self._bindings.get(tree_path)
        return bound

    def problems(self, tree: CapabilityTree) -> list[Problem]:
        """Every leaf whose handler cannot be resolved (unknown, not allowed, not callable)."""
        out = []
        for leaf in tree.leaves():
            try:
                self.resolve(leaf)
            except HandlerError as e:
                out.append(Problem(leaf.path_str, str(e)))
        return out

    def _import(self, ref: str, path: str) -> Handler:
        if ref in self._imported:
            return self._imported[ref]
        module_name, _, attr = ref.partition(":")
        if not self.is_allowed(module_name, attr):
            allowed = ", ".join(self.allowed_modules) or "none configured"
            raise HandlerError(f"handler {ref!r} of {path} is outside the allowed modules "
                               f"({allowed})")
        try:
            module = importlib.import_module(module_name)
        except ImportError as e:
            raise HandlerError(f"unknown handler {ref!r} of {path}: cannot import "
                               f"{module_name!r} ({e})") from e
        except BaseException as e:  # its top-level code failed (SystemExit too)
            raise HandlerError(f"handler {ref!r} of {path}: importing {module_name!r} raised "
                               f"{type(e).__name__}: {e}") from None
        fn: Handler | None = getattr(module, attr, None)
        if fn is None or not callable(fn) or isinstance(fn, types.ModuleType):
            raise HandlerError(f"unknown handler {ref!r} of {path}: {module_name} has no "
                               f"callable {attr!r}")
        if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
            raise HandlerError(f"handler {ref!r} of {path} is async; handlers are called "
                               "synchronously (an un-awaited coroutine would never run)")
        # The callable itself must come from an allowed module: `from os import system` in an
        # allowed module must not make `os.system` a handler.
        defined_in = getattr(fn, "__module__", None)
        if not isinstance(defined_in, str) or not (
                self._is_within_allowed(defined_in)
                or (ref in self._refs and defined_in == module_name)):
            raise HandlerError(f"handler {ref!r} of {path} is defined in {defined_in!r}, "
                               f"outside the allowed modules ({', '.join(self.allowed_modules)})")
        self._imported[ref] = fn
        return fn


class LocalExecutor:
    """Runs handlers in this process, each under a timeout; a leaf with no handler returns its
    validated arguments (routing-only catalogs)."""

    def __init__(self, handlers: HandlerTable | None = None, *, timeout_s: float = 30.0) -> None:
        self.handlers = handlers or HandlerTable()
        self.timeout_s = timeout_s
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=4,
                                                           thread_name_prefix="leaf")

    def execute(self, leaf: Node, arguments: Mapping[str, Any], call_id: str) -> LeafOutcome:
        handler = resolve_call(self.handlers, leaf, arguments)
        if isinstance(handler, LeafOutcome):
            return handler
        context = CallContext(call_id=call_id, leaf_path=leaf.path_str)
        future = self._pool.submit(run_with_call_context, context, handler, arguments)
        # Wait, then read: a handler that itself raises TimeoutError is the handler's error, not
        # ours (future.result(timeout=…) raises the same class for both).
        done, _ = concurrent.futures.wait([future], timeout=self.timeout_s)
        if not done:
            # A call still queued behind busy handler threads is cancelled, so "timed out"
            # never means "runs later"; one already running cannot be stopped on a thread.
            if future.cancel():
                return LeafOutcome(error=f"handler timed out after {self.timeout_s:g} s and "
                                         "never started (every handler thread was busy); "
                                         "it will not run")
            return LeafOutcome(error=f"handler timed out after {self.timeout_s:g} s; it is "
                                     "still running in the background and may yet take effect")
        try:
            return LeafOutcome(result=future.result())
        # A failing tool is the tool's misstep, recorded on the frame. SystemExit and
        # KeyboardInterrupt too: raised in the tool's thread they would end the session's
        # worker, leaving the session running forever, not stop the process.
        except (Exception, SystemExit, KeyboardInterrupt) as e:
            log.info("leaf %s (%s) raised %r", leaf.path_str, call_id, e)
            return LeafOutcome(error=f"{type(e).__name__}: {e}")

    def close(self) -> None:
        """Cancel queued calls; running handlers finish on their own threads."""
        self._pool.shutdown(wait=False, cancel_futures=True)
