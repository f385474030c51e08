"""Leaf handlers in worker processes: a call past its timeout has its worker killed.

`LocalExecutor` runs handlers on threads: a timed-out call returns, but a handler that never
ends keeps its thread (and whatever it holds) for the life of the process. `ProcessExecutor`
runs each call in a worker process from a small pool; on timeout the worker is killed and
replaced, so a hung, runaway or crashing handler (an infinite loop, `os._exit`, a segfault
in a C extension, memory beyond `memory_limit_bytes`) costs one worker, never the server.

Workers are started with the `spawn` method (forking a threaded server is unsafe) and reused
between calls. A catalog's `module:function` handler is imported by the worker by that path
(after the parent checked it against the allowlist); a handler bound in code crosses by
pickle, so it must be a module-level function. Arguments and results cross as pickles;
`current_call()` works inside.
"""

from __future__ import annotations

import importlib
import logging
import multiprocessing
import multiprocessing.connection
import pickle
import threading
from collections.abc import Mapping
from typing import Any

from stackroute.runtime.errors import HandlerError
from stackroute.runtime.handlers import (
    CallContext,
    Handler,
    HandlerTable,
    LeafOutcome,
    LocalExecutor,
    resolve_call,
    run_with_call_context,
)
from stackroute.runtime.tree import Node

log = logging.getLogger(__name__)


class _Worker:
    def __init__(self, context: Any, memory_limit_bytes: int | None) -> None:
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(child, memory_limit_bytes),
                                       daemon=True, name="stackroute-leaf")
        self.process.start()
        child.close()

    def stop(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(timeout=5.0)
        self.conn.close()


class ProcessExecutor:
    """Runs handlers in worker processes under a timeout (see the module docstring); a leaf
    with no handler returns its validated arguments, as `LocalExecutor` does."""

    def __init__(self, handlers: HandlerTable | None = None, *, timeout_s: float = 30.0,
                 max_workers: int = 2, memory_limit_bytes: int | None = None) -> None:
        if max_workers < 1:
            raise ValueError(f"max_workers must be at least 1; got {max_workers}")
        self.handlers = handlers or HandlerTable()
        self.timeout_s = timeout_s
        self.memory_limit_bytes = memory_limit_bytes
        self._context = multiprocessing.get_context("spawn")
        self._idle: list[_Worker] = []
        self._slots = threading.BoundedSemaphore(max_workers)
        self._lock = threading.Lock()
        self._is_closed = False
        self.num_killed = 0  # workers stopped for a timeout or a crash
        self._local: LocalExecutor | None = None  # in-process handler kinds, made on first use

    def execute(self, leaf: Node, arguments: Mapping[str, Any], call_id: str) -> LeafOutcome:
        if self.handlers.is_in_process(leaf):  # a forwarding kind (MCP): I/O, on a thread
            return self._in_process().execute(leaf, arguments, call_id)
        handler = resolve_call(self.handlers, leaf, arguments)
        if isinstance(handler, LeafOutcome):
            return handler
        target: Handler | str = self.handlers.import_ref(leaf) or handler
        try:
            payload = pickle.dumps((target, dict(arguments),
                                    CallContext(call_id=call_id, leaf_path=leaf.path_str)))
        except (pickle.PicklingError, AttributeError, TypeError) as e:
            return LeafOutcome(error=f"handler of {leaf.path_str} cannot run in a worker "
                                     f"process: {e} (use a module-level function)")
        with self._slots:
            worker = self._take()
            try:
                worker.conn.send_bytes(payload)
                if not worker.conn.poll(self.timeout_s):
                    self._discard(worker)
                    return LeafOutcome(error=f"handler timed out after {self.timeout_s:g} s; "
                                             "its worker process was stopped")
                status, value = pickle.loads(worker.conn.recv_bytes())
            except (EOFError, OSError, pickle.UnpicklingError) as e:
                worker.process.join(timeout=1.0)  # reap it, to report how it ended
                code = worker.process.exitcode
                self._discard(worker)
                log.info("leaf %s (%s): worker died (%r, exit code %s)", leaf.path_str,
                         call_id, e, code)
                return LeafOutcome(error=f"handler's worker process died (exit code {code})")
            self._give_back(worker)
        if status == "ok":
            return LeafOutcome(result=value)
        log.info("leaf %s (%s) raised %s", leaf.path_str, call_id, value)
        return LeafOutcome(error=str(value))

    def _in_process(self) -> LocalExecutor:
        with self._lock:
            if self._local is None:
                self._local = LocalExecutor(self.handlers, timeout_s=self.timeout_s)
            return self._local

    def close(self) -> None:
        with self._lock:
            if self._local is not None:
                self._local.close()
            self._is_closed = True
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.stop()

    def _take(self) -> _Worker:
        with self._lock:
            if self._is_closed:
                raise HandlerError("the process executor is closed")
            while self._idle:
                worker = self._idle.pop()
                if worker.process.is_alive():
                    return worker
                worker.stop()
        return _Worker(self._context, self.memory_limit_bytes)

    def _give_back(self, worker: _Worker) -> None:
        with self._lock:
            if not self._is_closed:
                self._idle.append(worker)
                return
        worker.stop()

    def _discard(self, worker: _Worker) -> None:
        with self._lock:
            self.num_killed += 1
        worker.stop()


def _imported(ref: str) -> Handler:
    """The handler at `module:function` (allowed by the parent before it was sent)."""
    module_name, _, attr = ref.partition(":")
    handler: Handler = getattr(importlib.import_module(module_name), attr)
    return handler


def _serve(conn: multiprocessing.connection.Connection, memory_limit_bytes: int | None) -> None:
    """A worker's loop: one call per message until the pipe closes."""
    if memory_limit_bytes is not None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (memory_limit_bytes, memory_limit_bytes))
    while True:
        try:
            payload = conn.recv_bytes()
        except (EOFError, OSError):
            return
        target: Handler | str
        target, arguments, context = pickle.loads(payload)
        try:
            handler = _imported(target) if isinstance(target, str) else target
            reply: tuple[str, Any] = ("ok", run_with_call_context(context, handler, arguments))
        # As in LocalExecutor: a failing tool is the tool's misstep, SystemExit included.
        except (Exception, SystemExit, KeyboardInterrupt) as e:
            reply = ("error", f"{type(e).__name__}: {e}")
        try:
            data = pickle.dumps(reply)
        except (pickle.PicklingError, AttributeError, TypeError) as e:
            data = pickle.dumps(("error", f"result is not picklable: {e}"))
        conn.send_bytes(data)
