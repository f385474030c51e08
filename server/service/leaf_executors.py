"""Where a session's leaf handlers run: on threads of the server, or in killable worker
processes under a timeout and a memory limit (`SessionOptions.leaf_isolation`)."""

from __future__ import annotations

from stackroute.runtime.handlers import Executor, HandlerTable, LocalExecutor
from stackroute.runtime.process_executor import ProcessExecutor
from stackroute.server.service.session_options import SessionOptions


def leaf_executor(handlers: HandlerTable, options: SessionOptions) -> Executor:
    if options.leaf_isolation == "process":
        return ProcessExecutor(handlers, timeout_s=options.leaf_timeout_s,
                               max_workers=options.max_workers,
                               memory_limit_bytes=options.max_leaf_memory_bytes)
    if options.leaf_isolation == "thread":
        return LocalExecutor(handlers, timeout_s=options.leaf_timeout_s)
    raise ValueError(f"leaf_isolation must be 'thread' or 'process'; got "
                     f"{options.leaf_isolation!r}")
