"""Sessions: whole tasks run by the stack machine in background workers, persisted at every
transition so a restarted service resumes them.

A worker's loop is one transition at a time: `machine.step(state)` → `store.save_step(state,
new events)` → notify watchers. A process killed at any point resumes from the last saved
transition; the routing call in flight is simply made again, and a leaf call is never run
twice: `StoreExecutor` records each call by its idempotency key before handing back the
result, and hands back the recorded result when it meets the key again.

Over a shared store (PostgreSQL) several instances serve the same sessions: a worker advances
a session only while this instance holds its lease, every save carries the lease's fencing
token (`LeaseLostError`: another instance took it over, so this one drops the session), a
client's approve, reject or cancel claims the lease on whichever instance it reaches, and
`LeaseKeeper` renews this instance's leases and takes over the sessions of stopped instances.
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from stackroute.runtime.errors import InputError, StateError
from stackroute.runtime.governance import Limits, RunStatus
from stackroute.runtime.handlers import HandlerTable
from stackroute.runtime.machine import StackMachine
from stackroute.runtime.state import RunState
from stackroute.runtime.trace import EventKind, TraceEvent
from stackroute.runtime.tree import CapabilityTree
from stackroute.runtime.usage import Usage
from stackroute.server.engines.base import Engine
from stackroute.server.engines.trace_context import TRACEPARENT
from stackroute.server.routing.pool import RouterPool
from stackroute.server.routing.router import build_machine
from stackroute.server.service.catalog_registry import CatalogRegistry, UnknownCatalogError
from stackroute.server.service.engine_queue import QueueFullError
from stackroute.server.service.leaf_executors import leaf_executor
from stackroute.server.service.outcomes import fail_run, routing_outcome
from stackroute.server.service.prompt_limits import (
    PromptLimits,
    RoutingLimitError,
    check_prompt_limits,
)
from stackroute.server.service.session_events import (
    SessionWatchers,
    StreamItem,
    UnknownSessionError,
)
from stackroute.server.service.session_leases import LeaseKeeper
from stackroute.server.service.session_options import SessionOptions
from stackroute.server.service.store import SessionRecord, SessionRow
from stackroute.server.service.store_executor import Fence, FencedExecutor, StoreExecutor
from stackroute.server.service.store_protocol import (
    DuplicateRecordError,
    LeaseLostError,
    Listening,
    StoreBackend,
    StoreBusyError,
)

log = logging.getLogger(__name__)

MIN_RETRY_S = 0.05  # a busy store is retried after this, doubling up to MAX_RETRY_S
MAX_RETRY_S = 2.0
CLAIM_WAIT_S = 3.0  # a client's approve waits this long for another instance's lease to end
RETRYABLE = (sqlite3.OperationalError, StoreBusyError)  # the store is busy or away for now
RoutingObserver = Callable[[str, Usage], None]  # (routing_outcome, usage) of each routing call
# (session id, its newly saved trace events): telemetry_spans.SessionTracing.on_saved
SavedObserver = Callable[[str, Sequence[TraceEvent]], None]
# (session id, the id of the frame a step runs in) -> the W3C traceparent its engine calls
# forward, or None: telemetry_spans.SessionTracing.traceparent
StepTraceparent = Callable[[str, int | None], str | None]


class AutoApproveForbiddenError(InputError):
    """A client asked for auto_approve on a server whose operator does not allow it."""

    code = "auto_approve_forbidden"
    http_status = 403


class SessionsBusyError(QueueFullError):
    """Too many sessions are running; try again later (HTTP 429 with Retry-After)."""

    code = "too_many_sessions"

    def __init__(self, *, num_active: int, max_active: int) -> None:
        super().__init__(num_waiting=num_active, retry_after_s=1)
        self.args = (f"{num_active} sessions are running, the limit is {max_active}; "
                     "retry later",)


@dataclass(eq=False)
class _Live:
    """A session in memory: its state, its machine, and the lock that orders its transitions."""

    row: SessionRow
    state: RunState
    machine: StackMachine
    num_saved: int  # trace events already in the store
    fence: Fence  # the lease this instance holds on the session (token 0: an embedded store)
    is_dirty: bool = False  # a transition is made in memory but not saved yet
    lock: threading.Lock = field(default_factory=threading.Lock)


class SessionService:
    def __init__(self, store: StoreBackend, catalogs: CatalogRegistry, engine: Engine, *,
                 options: SessionOptions | None = None, handlers: HandlerTable | None = None,
                 on_routing_call: RoutingObserver | None = None,
                 routers: RouterPool | None = None) -> None:
        self.store = store
        self.routers = routers  # None: plain routing, a router per session
        self.on_routing_call = on_routing_call
        self.on_saved: SavedObserver | None = None  # set by the app when telemetry is on
        self.step_traceparent: StepTraceparent | None = None  # likewise
        self.catalogs = catalogs
        self.options = options or SessionOptions()
        handlers = handlers or HandlerTable(
            allowed_modules=self.options.allowed_handler_modules)
        self._leaf_executor = leaf_executor(handlers, self.options)
        self.executor = StoreExecutor(store, self._leaf_executor)
        self.engine = engine
        self._prompt_limits = PromptLimits(max_menu_options=self.options.max_menu_options,
                                           max_prompt_tokens=self.options.max_prompt_tokens)
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=self.options.max_workers, thread_name_prefix="session")
        self._lock = threading.Lock()  # guards the dicts below; taken after a session's lock
        self._live: dict[str, _Live] = {}
        self._active: set[str] = set()  # sessions with a worker job queued or running
        self._watchers = SessionWatchers(self.store, poll_s=self.options.poll_s)
        self._is_closing = False
        # This instance, as a lease owner: unique per process, readable in the database.
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
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
        with self._lock:
            if len(self._active) >= self.options.max_active:
                raise SessionsBusyError(num_active=len(self._active),
                                        max_active=self.options.max_active)
        session_id = uuid.uuid4().hex
        fence = Fence(session_id, 0)
        machine = self._machine(entry.tree, is_flat=is_flat, limits=run_limits, fence=fence)
        state = machine.start(task, run_id=session_id, is_flat=is_flat)
        check_prompt_limits(self.engine, machine, state, self._prompt_limits)
        fence.token = self.store.create_session(
            session_id, catalog_id=catalog_id, state=state, is_flat=is_flat,
            is_auto_approve=is_auto_approve, owner=self.owner)
        row = self.store.session_row(session_id)
        if row is None:
            raise RuntimeError(f"session {session_id} vanished right after it was created")
        if self.on_saved is not None:  # here, in the creating request's trace context
            self.on_saved(session_id, state.trace)
        with self._lock:
            self._live[session_id] = _Live(row=row, state=state, machine=machine,
                                           num_saved=len(state.trace), fence=fence)
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
        self._row(session_id)
        return "".join(json.dumps(e, ensure_ascii=False) + "\n"
                       for e in self.store.transitions(session_id))

    def approve(self, session_id: str, digest: str) -> SessionRecord:
        """Let the call waiting at the gate run; `digest` must be the pending call's."""
        return self._gate(session_id, digest, is_approved=True)

    def reject(self, session_id: str, digest: str) -> SessionRecord:
        return self._gate(session_id, digest, is_approved=False)

    def cancel(self, session_id: str) -> SessionRecord:
        live = self._live_session(session_id, is_client=True, is_forced=True)
        try:
            with live.lock:
                live.machine.cancel(live.state)
                self._persist(live)
                self._forget(session_id)
        except BaseException:
            self._settle_claim(live)
            raise
        self._watchers.notify(session_id)
        return self.get(session_id)

    def events(self, session_id: str, *, after_seq: int = -1,
               ) -> AsyncGenerator[StreamItem, None]:
        """The session's transitions with `seq > after_seq` as they are saved, then a
        `StreamEnd` once it is no longer running (done, paused, cancelled, …)."""
        self._row(session_id)
        return self._watchers.watch(session_id, after_seq)

    # -- start-up and shutdown ---------------------------------------------------------------
    def resume_interrupted(self) -> list[str]:
        """Resume every session a stopped process left running (over a shared store: those
        whose instance's lease expired, claimed for this one); paused ones stay paused
        (they are loaded when approved or rejected). Return the resumed ids."""
        resumed: list[str] = []
        with self._lock:
            if self._is_closing:
                return resumed
        for session_id in self.store.claim_expired(self.owner, lease_s=self.store.lease_s,
                                                   limit=-1):
            try:
                live = self._load_live(session_id)
            except StateError as e:
                self._fail_stored(session_id, str(e))
                continue
            log.info("resuming session %s at transition %d", session_id, live.num_saved)
            self._schedule(session_id)
            resumed.append(session_id)
        return resumed

    def start_lease_keeper(self) -> None:
        """Over a shared store: renew this instance's leases and take over expired ones."""
        if self._keeper is not None:
            self._keeper.start()

    def close(self) -> None:
        """Stop the workers after their current transition; running sessions stay running in
        the store and resume at the next start."""
        with self._lock:
            self._is_closing = True
        if self._keeper is not None:
            self._keeper.close()
        if self._listening is not None:
            self._listening.close()
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self.store.is_shared:  # hand the running sessions to the other instances now
            with self._lock:
                held = list(self._live.values())
            for live in held:
                try:
                    self.store.release_session(live.state.run_id, live.fence.token)
                except Exception:  # they take over when the lease expires instead
                    log.warning("could not release session %s", live.state.run_id)
        close = getattr(self._leaf_executor, "close", None)
        if callable(close):
            close()

    # -- workers -----------------------------------------------------------------------------
    def _schedule(self, session_id: str) -> None:
        with self._lock:
            if self._is_closing or session_id in self._active:
                return
            self._active.add(session_id)
        self._pool.submit(self._drive, session_id)

    def _drive(self, session_id: str) -> None:
        """Step a session until it stops running, saving after every transition. A store that
        is busy (another process holds the lock past the busy timeout) is waited out with
        backoff: the worker keeps the session and retries, it never drops it."""
        delay_s = MIN_RETRY_S
        while True:
            try:
                if not self._advance(session_id):
                    break
                delay_s = MIN_RETRY_S
                self._watchers.notify(session_id)
            except LeaseLostError as e:  # another instance advances it now
                log.info("session %s: %s; leaving it to the lease holder", session_id, e)
                with self._lock:
                    self._active.discard(session_id)
                    self._live.pop(session_id, None)
                break
            except DuplicateRecordError as e:
                # A save whose commit went through though its answer was lost (a dropped
                # connection), retried: the store holds the truth. Let go of the session so
                # it is claimed and reloaded from there (by this instance's keeper or another).
                log.warning("session %s: %s; reloading it from the store", session_id, e)
                with self._lock:
                    self._active.discard(session_id)
                    live = self._live.pop(session_id, None)
                if live is not None and self.store.is_shared:
                    self.store.release_session(session_id, live.fence.token)
                break
            except RETRYABLE as e:
                with self._lock:
                    if self._is_closing:  # resumed from the store at the next start
                        self._active.discard(session_id)
                        self._live.pop(session_id, None)
                        break
                log.warning("session %s: the store is busy (%s); retrying in %.2f s",
                            session_id, e, delay_s)
                time.sleep(delay_s)
                delay_s = min(delay_s * 2, MAX_RETRY_S)
            except Exception:
                log.exception("worker of session %s stopped", session_id)
                with self._lock:
                    self._active.discard(session_id)
                    self._live.pop(session_id, None)  # reloaded from the store on next use
                break
        self._watchers.notify(session_id)

    def _advance(self, session_id: str) -> bool:
        """One transition (or an automatic approval), or the save of one that is not saved
        yet; False when there is nothing to do."""
        with self._lock:
            live = self._live.get(session_id)
        if live is None:
            with self._lock:
                self._active.discard(session_id)
            return False
        with live.lock:
            state = live.state
            if self._is_closing:
                is_working = False
            elif live.is_dirty or self._auto_approve(live):
                is_working = True  # dirty: the last transition's save failed, save it first
            elif state.status is RunStatus.RUNNING:
                self._step(live)
                # Approved in the same save as the pause: such a session is never seen paused.
                self._auto_approve(live)
                is_working = True
            else:
                is_working = False
            if not is_working:  # leave under both locks, so an approval schedules us again
                with self._lock:
                    self._active.discard(session_id)
                    if state.status.is_final:
                        self._live.pop(session_id, None)
                return False
            live.is_dirty = True
            self._persist(live, is_kept_on_failure=True)
        return True

    def _auto_approve(self, live: _Live) -> bool:
        state, pending = live.state, live.state.pending
        if (state.status is RunStatus.PAUSED and live.row.is_auto_approve
                and pending is not None and pending.is_gated):
            live.machine.approve(state, pending.digest)
            return True
        return False

    def _step(self, live: _Live) -> None:
        state = live.state
        num_events = len(state.trace)
        # This worker thread runs outside any request, so no trace context reached it: set
        # the one the step's engine calls forward (a remote engine's traceparent header).
        token = TRACEPARENT.set(self._traceparent(state))
        try:
            if state.pending is None:  # the next step is a routing call: the same limits
                check_prompt_limits(self.engine, live.machine, state, self._prompt_limits)
            live.machine.step(state)
        except RoutingLimitError as e:
            fail_run(state, str(e))
        except (*RETRYABLE, LeaseLostError):
            raise  # the store is busy (the worker retries the step) or the lease is lost
        except Exception as e:  # an engine failure or our bug: the session ends, recorded
            log.exception("session %s failed at step %d", state.run_id, state.num_steps)
            fail_run(state, f"{type(e).__name__}: {e}")
        finally:
            TRACEPARENT.reset(token)
        if self.on_routing_call is not None:
            for event in state.trace[num_events:]:
                if event.kind is EventKind.ROUTE:
                    self.on_routing_call(routing_outcome(live.machine.tree, event),
                                         Usage.from_dict(dict(event.usage or {})))

    def _traceparent(self, state: RunState) -> str | None:
        """The trace context of the frame the next step runs in, when telemetry is on."""
        if self.step_traceparent is None:
            return None
        return self.step_traceparent(state.run_id,
                                     state.top().frame_id if state.stack else None)

    def _persist(self, live: _Live, *, is_kept_on_failure: bool = False) -> None:
        """Save the state and its new events. When the save fails, a worker's transition is
        kept in memory (`is_kept_on_failure`: the worker saves it on its retry, since it may
        hold a tool's outcome); a client's transition (approve, cancel) is dropped, so memory
        equals the store and the client can retry."""
        state = live.state
        events = state.trace[live.num_saved:]
        try:
            self.store.save_step(state.run_id, state, events, token=live.fence.token)
        except Exception:
            if not is_kept_on_failure:
                self._reload(live)
            raise
        if self.on_saved is not None:
            self.on_saved(state.run_id, events)
        live.num_saved = len(state.trace)
        live.is_dirty = False

    def _reload(self, live: _Live) -> None:
        record = self.store.load_session(live.state.run_id)
        if record is not None:
            live.state = record.state
            live.num_saved = len(record.state.trace)
        live.is_dirty = False

    def _gate(self, session_id: str, digest: str, *, is_approved: bool) -> SessionRecord:
        live = self._live_session(session_id, is_client=True)
        try:
            with live.lock:
                if is_approved:
                    live.machine.approve(live.state, digest)
                else:
                    live.machine.reject(live.state, digest)
                self._persist(live)
        except BaseException:  # a wrong digest (409), a store error
            self._settle_claim(live)
            raise
        self._watchers.notify(session_id)
        self._schedule(session_id)
        return self.get(session_id)

    def _settle_claim(self, live: _Live) -> None:
        """After a client's request failed over a shared store: the lease it claimed must not
        stay with an instance that is not advancing the session (its keeper would renew it
        forever). A running session is advanced here; any other lets the lease go."""
        if not self.store.is_shared:
            return
        session_id = live.state.run_id
        if live.state.status is RunStatus.RUNNING:
            self._schedule(session_id)
            return
        with self._lock:
            is_ours = session_id in self._active
        if not is_ours:
            try:
                self.store.release_session(session_id, live.fence.token)
            except Exception:  # it expires instead: keepers renew running sessions only
                log.warning("could not release session %s", session_id, exc_info=True)

    # -- helpers -----------------------------------------------------------------------------
    def _row(self, session_id: str) -> SessionRow:
        return self._watchers.row(session_id)

    def _live_session(self, session_id: str, *, is_client: bool = False,
                      is_forced: bool = False) -> _Live:
        """The session in memory. Over a shared store a client's request claims the lease
        and reloads the session (another instance may have advanced it), unless this
        instance's own worker holds it; `is_forced` (cancel) takes the lease from a live
        holder, whose next write is then refused."""
        with self._lock:
            live = self._live.get(session_id)
            is_ours = session_id in self._active
        if live is not None and (is_ours or not self.store.is_shared):
            return live
        if not self.store.is_shared:
            return self._load_live(session_id)
        if not is_client:
            raise RuntimeError("a shared store's session is loaded by a claim")
        deadline = time.monotonic() + CLAIM_WAIT_S
        while self.store.claim_session(session_id, self.owner, lease_s=self.store.lease_s,
                                       is_forced=is_forced) is None:
            if self.store.session_row(session_id) is None:
                raise UnknownSessionError(f"no session {session_id!r}")
            if time.monotonic() > deadline:
                raise StateError(f"session {session_id} is being advanced by another "
                                 "instance; retry")
            time.sleep(MIN_RETRY_S)
        return self._load_live(session_id)

    def _load_live(self, session_id: str) -> _Live:
        """Load the session from the store into memory, under the lease just claimed (it
        replaces what memory held, which another instance may have made stale)."""
        token = self.store.lease_token(session_id)
        record = self.get(session_id)
        if record.row.status.is_final:
            raise StateError(f"session {session_id} is {record.row.status.value}")
        try:
            entry = self.catalogs.get(record.row.catalog_id)
        except UnknownCatalogError as e:
            raise StateError(f"session {session_id} needs catalog {record.row.catalog_id!r}, "
                             "which is not loaded") from e
        fence = Fence(session_id, token or 0)
        machine = self._machine(entry.tree, is_flat=record.row.is_flat,
                                limits=record.state.limits, fence=fence)
        live = _Live(row=record.row, state=record.state, machine=machine,
                     num_saved=len(record.state.trace), fence=fence)
        with self._lock:
            if session_id in self._active:  # this instance's worker holds it: keep that
                kept = self._live[session_id]  # one, under the lease just claimed again
                kept.fence.token = fence.token
                return kept
            self._live[session_id] = live
            return live

    def _forget(self, session_id: str) -> None:
        with self._lock:
            self._live.pop(session_id, None)

    def _fail_stored(self, session_id: str, message: str) -> None:
        record = self.store.load_session(session_id)
        if record is None:
            return
        log.warning("session %s cannot resume: %s", session_id, message)
        num_saved = len(record.state.trace)
        fail_run(record.state, message)
        self.store.save_step(session_id, record.state, record.state.trace[num_saved:],
                             token=self.store.lease_token(session_id) if self.store.is_shared
                             else None)

    def _machine(self, tree: CapabilityTree, *, is_flat: bool, limits: Limits,
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
