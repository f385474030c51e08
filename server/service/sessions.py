"""Sessions: whole tasks run by the stack machine in background workers, persisted at every
transition so a restarted service resumes them. This module is the public API
(`SessionService`); its parts are the live-session cache (`live_sessions`), the worker
(`session_worker`: one transition per step, saved, watchers notified), the lease claims
(`session_claims`), the lease keeper (`session_leases`) and the errors (`session_errors`).

A process killed at any point resumes from the last saved transition; the routing call in
flight is simply made again, and a leaf call is never run twice: `StoreExecutor` records each
call by its idempotency key before handing back the result, and hands back the recorded
result when it meets the key again.

Over a shared store (PostgreSQL) several instances serve the same sessions: a worker advances
a session only while this instance holds its lease, every save carries the token of the claim
that granted it (`LeaseLostError`: another instance took it over, so this one drops the
session), a client's approve, reject or cancel claims the lease on whichever instance it
reaches, and `LeaseKeeper` renews this instance's leases and takes over the sessions of
stopped instances.
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import os
import socket
import uuid
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import replace
from typing import Any

from stackroute.runtime.errors import InputError, StateError
from stackroute.runtime.governance import Limits, RunStatus
from stackroute.runtime.handlers import HandlerTable
from stackroute.runtime.machine import StackMachine
from stackroute.runtime.state import arguments_digest
from stackroute.runtime.tree import CapabilityTree
from stackroute.server.engines.base import Engine
from stackroute.server.routing.pool import RouterPool
from stackroute.server.routing.router import build_machine
from stackroute.server.service.catalog_registry import CatalogRegistry, UnknownCatalogError
from stackroute.server.service.leaf_executors import leaf_executor
from stackroute.server.service.live_sessions import LiveSession, LiveSessions
from stackroute.server.service.prompt_limits import PromptLimits, check_prompt_limits
from stackroute.server.service.session_claims import SessionClaims
from stackroute.server.service.session_errors import AutoApproveForbiddenError, SessionsBusyError
from stackroute.server.service.session_events import (
    SessionWatchers,
    StreamItem,
    UnknownSessionError,
)
from stackroute.server.service.session_leases import LeaseKeeper
from stackroute.server.service.session_options import SessionOptions
from stackroute.server.service.session_worker import (
    RoutingObserver,
    SavedObserver,
    SessionObservers,
    SessionWorker,
    StepTraceparent,
)
from stackroute.server.service.store_executor import Fence, FencedExecutor, StoreExecutor
from stackroute.server.service.store_protocol import Listening, StoreBackend
from stackroute.server.service.store_records import CatalogGoneError, SessionRecord, SessionRow

log = logging.getLogger(__name__)

# Names callers import from here.
__all__ = ["AutoApproveForbiddenError", "RoutingObserver", "SessionService",
           "SessionsBusyError"]


class SessionService:
    def __init__(self, store: StoreBackend, catalogs: CatalogRegistry, engine: Engine, *,
                 options: SessionOptions | None = None, handlers: HandlerTable | None = None,
                 routers: RouterPool | None = None,
                 on_routing_call: RoutingObserver | None = None,
                 on_saved: SavedObserver | None = None,
                 step_traceparent: StepTraceparent | None = None) -> None:
        """`on_routing_call` hears of every routing call (metrics); `on_saved` of every saved
        transition and `step_traceparent` gives each step's trace context (telemetry)."""
        self.store = store
        self.routers = routers  # None: plain routing, a router per session
        self.catalogs = catalogs
        self.engine = engine
        self.options = options or SessionOptions()
        self.observers = SessionObservers(on_routing_call=on_routing_call, on_saved=on_saved,
                                          step_traceparent=step_traceparent)
        handlers = handlers or HandlerTable(
            allowed_modules=self.options.allowed_handler_modules)
        self._leaf_executor = leaf_executor(handlers, self.options)
        self.executor = StoreExecutor(store, self._leaf_executor)
        self._prompt_limits = PromptLimits(max_menu_options=self.options.max_menu_options,
                                           max_prompt_tokens=self.options.max_prompt_tokens)
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=self.options.max_workers, thread_name_prefix="session")
        self._live = LiveSessions()
        self._watchers = SessionWatchers(self.store, poll_s=self.options.poll_s)
        # This instance, as a lease owner: unique per process, readable in the database.
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._worker = SessionWorker(store, self._live, engine=engine,
                                     prompt_limits=self._prompt_limits,
                                     observers=self.observers, notify=self._watchers.notify)
        self._claims = SessionClaims(store, self._live, catalogs, owner=self.owner,
                                     machine=self._machine)
        self._keeper: LeaseKeeper | None = None
        self._listening: Listening | None = None
        if store.is_shared:  # other instances save transitions and hold leases too
            self._listening = store.listen(self._watchers.notify)
            self._keeper = LeaseKeeper(store, self.owner, lease_s=store.lease_s,
                                       take_over=self.resume_interrupted)

    # -- requests ----------------------------------------------------------------------------
    def create(self, catalog_id: str, task: str, *, limits: Mapping[str, Any] | None = None,
               is_flat: bool = False, is_auto_approve: bool = False) -> SessionRecord:
        """Start a session and its background worker; return its first saved state."""
        if not task.strip():
            raise InputError("task must not be empty")
        if is_auto_approve and not self.options.is_auto_approve_allowed:
            raise AutoApproveForbiddenError("this server does not let clients set "
                                            "auto_approve (setting allow_auto_approve); "
                                            "approve each gated call instead")
        entry = self.catalogs.get(catalog_id)
        run_limits = self._limits(limits)
        num_active = self._live.num_active()
        if num_active >= self.options.max_active:
            raise SessionsBusyError(num_active=num_active, max_active=self.options.max_active)
        session_id = uuid.uuid4().hex
        fence = Fence(session_id, 0)
        machine = self._machine(entry.tree, is_flat, run_limits, fence)
        state = machine.start(task, run_id=session_id, is_flat=is_flat)
        check_prompt_limits(self.engine, machine, state, self._prompt_limits)
        try:
            fence.token = self.store.create_session(
                session_id, catalog_id=catalog_id, state=state, is_flat=is_flat,
                is_auto_approve=is_auto_approve, owner=self.owner)
        except CatalogGoneError as e:  # deleted through another instance just now
            self.catalogs.forget(catalog_id)
            raise UnknownCatalogError(f"no catalog {catalog_id!r}: it was deleted") from e
        row = self.store.session_row(session_id)
        if row is None:
            raise RuntimeError(f"session {session_id} vanished right after it was created")
        if self.observers.on_saved is not None:  # here, in the creating request's context
            self.observers.on_saved(session_id, state.trace)
        self._live.add(LiveSession(row=row, state=state, machine=machine,
                                   num_saved=len(state.trace), fence=fence))
        self._schedule(session_id)
        return self.get(session_id)

    def get(self, session_id: str) -> SessionRecord:
        """The session as last saved: state, stack, pending call and trace."""
        record = self.store.load_session(session_id)
        if record is None:
            raise UnknownSessionError(f"no session {session_id!r}")
        return record

    def list_sessions(self, *, status: RunStatus | None = None,
                      catalog_id: str | None = None, limit: int = 100,
                      offset: int = 0) -> list[SessionRow]:
        return self.store.list_sessions(status=status, catalog_id=catalog_id, limit=limit,
                                        offset=offset)

    def count_by_status(self) -> dict[str, int]:
        """Sessions in the store by status (for the metrics)."""
        return self.store.count_by_status()

    def trace_jsonl(self, session_id: str) -> str:
        self._watchers.row(session_id)
        return "".join(json.dumps(e, ensure_ascii=False) + "\n"
                       for e in self.store.transitions(session_id))

    def approve(self, session_id: str, digest: str) -> SessionRecord:
        """Let the call waiting at the gate run; `digest` must be the pending call's."""
        return self._decide(session_id, lambda live: live.machine.approve(live.state, digest))

    def reject(self, session_id: str, digest: str) -> SessionRecord:
        """Decline the paused call (at its gate, or waiting for values)."""
        return self._decide(session_id, lambda live: live.machine.reject(live.state, digest))

    def supply(self, session_id: str, digest: str, values: Any) -> SessionRecord:
        """Give the call waiting for values (`PendingCall.missing_values`) exactly those: it
        then runs, or waits at its gate under a new digest (a sensitive leaf). Wrong values
        are an InputError (400) and change nothing."""
        return self._decide(session_id,
                            lambda live: live.machine.supply(live.state, digest, values))

    def submit_result(self, session_id: str, digest: str, *, result: Any = None,
                      error: str | None = None) -> SessionRecord:
        """The call waiting at the gate, run by the client itself (a client-executed tool):
        its outcome is recorded under the call's id before the call is let through, so the
        session's executor hands it back (as a replay) instead of running anything here."""
        live = self._claims.for_client(session_id)
        try:
            with live.lock:
                pending = live.state.pending
                if pending is None or not pending.is_gated or pending.digest != digest:
                    live.machine.approve(live.state, digest)  # raises, saying why
                    raise StateError(f"session {session_id}: no call waits for a result")
                self.store.begin_leaf(pending.call_id, path=pending.path,
                                      digest=arguments_digest(pending.path, pending.arguments),
                                      session_id=session_id, token=live.fence.token)
                self.store.finish_leaf(pending.call_id, result=result, error=error)
                live.machine.approve(live.state, digest)
                self._worker.save(live)
        except BaseException:
            self._claims.settle(live, self._schedule)
            raise
        self._watchers.notify(session_id)
        self._schedule(session_id)
        return self.get(session_id)

    def cancel(self, session_id: str) -> SessionRecord:
        live = self._claims.for_client(session_id, is_forced=True)
        try:
            with live.lock:
                live.machine.cancel(live.state)
                self._worker.save(live)
                self._live.forget(session_id)
        except BaseException:
            self._claims.settle(live, self._schedule)
            raise
        self._watchers.notify(session_id)
        return self.get(session_id)

    def events(self, session_id: str, *, after_seq: int = -1,
               ) -> AsyncGenerator[StreamItem, None]:
        """The session's transitions with `seq > after_seq` as they are saved, then a
        `StreamEnd` once it is no longer running (done, paused, cancelled, …)."""
        self._watchers.row(session_id)
        return self._watchers.watch(session_id, after_seq)

    def _decide(self, session_id: str, act: Callable[[LiveSession], None]) -> SessionRecord:
        """Apply the client's decision (`act`: approve, reject or supply) to the paused call
        under the session's lease, save it, and go on."""
        live = self._claims.for_client(session_id)
        try:
            with live.lock:
                act(live)
                self._worker.save(live)
        except BaseException:  # a wrong digest (409), a store error
            self._claims.settle(live, self._schedule)
            raise
        self._watchers.notify(session_id)
        self._schedule(session_id)
        return self.get(session_id)

    # -- start-up and shutdown ---------------------------------------------------------------
    def resume_interrupted(self) -> list[str]:
        """Resume every session a stopped process left running (over a shared store: those
        whose instance's lease expired, claimed for this one); paused ones stay paused
        (they are loaded when approved or rejected). Return the resumed ids."""
        return self._claims.take_over(self._schedule)

    def start_lease_keeper(self) -> None:
        """Over a shared store: renew this instance's leases and take over expired ones."""
        if self._keeper is not None:
            self._keeper.start()

    def close(self) -> None:
        """Stop the workers after their current transition; running sessions stay running in
        the store and resume at the next start."""
        self._live.close()
        if self._keeper is not None:
            self._keeper.close()
        if self._listening is not None:
            self._listening.close()
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self.store.is_shared:  # hand the running sessions to the other instances now
            for live in self._live.close():
                try:
                    self.store.release_session(live.session_id, live.fence.token)
                except Exception:  # they take over when the lease expires instead
                    log.warning("could not release session %s", live.session_id)
        close = getattr(self._leaf_executor, "close", None)
        if callable(close):
            close()

    # -- helpers -----------------------------------------------------------------------------
    def _schedule(self, session_id: str) -> None:
        if self._live.activate(session_id):
            self._pool.submit(self._worker.drive, session_id)

    def _machine(self, tree: CapabilityTree, is_flat: bool, limits: Limits,
                 fence: Fence) -> StackMachine:
        executor = FencedExecutor(self.executor, fence)
        if self.routers is not None:
            return self.routers.machine(tree, is_flat=is_flat, limits=limits,
                                        executor=executor)
        return build_machine(tree, self.engine, is_flat=is_flat, limits=limits,
                             executor=executor)

    def _limits(self, given: Mapping[str, Any] | None) -> Limits:
        limits = Limits.from_dict(dict(given or {}))
        cap = self.options.max_session_steps
        if cap is None:
            return limits
        if given and "max_steps" in given and limits.max_steps > cap:
            raise InputError(f"limit max_steps {limits.max_steps} is above this server's "
                             f"max_session_steps {cap}")
        return replace(limits, max_steps=min(limits.max_steps, cap))
