"""The worker that advances one session: `step` makes one transition (or an automatic
approval) and saves it; `drive` steps until the session stops running.

    step = live session → machine.step(state) → store.save_step(state, new events) → notify

A store that is busy is waited out with backoff (the worker keeps the session and retries,
it never drops it); every other way a worker stops (its lease was taken over, a save whose
commit went through though its answer was lost, our bug, shutdown) goes through one cleanup
path, `_let_go`, which only differs in whether the lease is handed back at once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

from stackroute.runtime.governance import RunStatus
from stackroute.runtime.state import RunState
from stackroute.runtime.trace import EventKind, TraceEvent
from stackroute.runtime.usage import Usage
from stackroute.server.engines.base import Engine
from stackroute.server.engines.trace_context import TRACEPARENT
from stackroute.server.service.live_sessions import LiveSession, LiveSessions
from stackroute.server.service.outcomes import fail_run, routing_outcome
from stackroute.server.service.prompt_limits import (
    PromptLimits,
    RoutingLimitError,
    check_prompt_limits,
)
from stackroute.server.service.store_protocol import StoreBackend
from stackroute.server.service.store_records import (
    DuplicateRecordError,
    LeaseLostError,
    StoreBusyError,
)

log = logging.getLogger(__name__)

MIN_RETRY_S = 0.05  # a busy store is retried after this, doubling up to MAX_RETRY_S
MAX_RETRY_S = 2.0
RoutingObserver = Callable[[str, Usage], None]  # (routing_outcome, usage) of each routing call
# (session id, its newly saved trace events): telemetry_spans.SessionTracing.on_saved
SavedObserver = Callable[[str, Sequence[TraceEvent]], None]
# (session id, the id of the frame a step runs in) -> the W3C traceparent its engine calls
# forward, or None: telemetry_spans.SessionTracing.traceparent
StepTraceparent = Callable[[str, int | None], str | None]


@dataclass(frozen=True, kw_only=True)
class SessionObservers:
    """Who hears about a session's work (metrics, tracing); fixed when the service is built."""

    on_routing_call: RoutingObserver | None = None
    on_saved: SavedObserver | None = None
    step_traceparent: StepTraceparent | None = None


class Step(Enum):
    ADVANCED = "advanced"  # a transition was made and saved: step again
    IDLE = "idle"  # nothing to do (paused, finished, shutting down): the worker let go


class SessionWorker:
    def __init__(self, store: StoreBackend, live: LiveSessions, *, engine: Engine,
                 prompt_limits: PromptLimits, observers: SessionObservers,
                 notify: Callable[[str], None]) -> None:
        self.store = store
        self.live = live
        self.engine = engine
        self.prompt_limits = prompt_limits
        self.observers = observers
        self.notify = notify  # wakes the session's watchers

    def drive(self, session_id: str) -> None:
        """Step the session until it stops running, saving after every transition."""
        delay_s = MIN_RETRY_S
        while True:
            try:
                if self.step(session_id) is Step.IDLE:
                    break
                delay_s = MIN_RETRY_S
                self.notify(session_id)
                continue
            except StoreBusyError as e:
                if not self.live.is_closing:
                    log.warning("session %s: the store is busy (%s); retrying in %.2f s",
                                session_id, e, delay_s)
                    time.sleep(delay_s)
                    delay_s = min(delay_s * 2, MAX_RETRY_S)
                    continue
                reason, is_released = "shutting down; it resumes at the next start", False
            except LeaseLostError as e:  # another instance advances it now
                reason, is_released = f"{e}; leaving it to the lease holder", False
            except DuplicateRecordError as e:
                # A save whose commit went through though its answer was lost (a dropped
                # connection), retried: the store holds the truth. Let go of the session so
                # it is claimed and reloaded from there (by this instance's keeper or another).
                reason, is_released = f"{e}; reloading it from the store", True
            except Exception as e:  # our bug: reloaded from the store on next use
                log.exception("worker of session %s stopped", session_id)
                reason, is_released = f"worker stopped: {type(e).__name__}", False
            self._let_go(session_id, reason, is_released=is_released)
            break
        self.notify(session_id)

    def step(self, session_id: str) -> Step:
        """One transition (or an automatic approval), or the save of one that is not saved
        yet; IDLE when there is nothing to do."""
        live, _ = self.live.lookup(session_id)
        if live is None:
            self.live.deactivate(session_id, is_forgotten=False)
            return Step.IDLE
        with live.lock:
            state = live.state
            if self.live.is_closing:
                is_working = False
            elif live.is_dirty or self._auto_approve(live):
                is_working = True  # dirty: the last transition's save failed, save it first
            elif state.status is RunStatus.RUNNING:
                self._transition(live)
                # Approved in the same save as the pause: such a session is never seen paused.
                self._auto_approve(live)
                is_working = True
            else:
                is_working = False
            if not is_working:  # leave under both locks, so an approval schedules us again
                self.live.deactivate(session_id, is_forgotten=state.status.is_final)
                return Step.IDLE
            live.is_dirty = True
            self.save(live, is_kept_on_failure=True)
        return Step.ADVANCED

    def save(self, live: LiveSession, *, is_kept_on_failure: bool = False) -> None:
        """Save the state and its new events under the session's lease. When the save fails,
        a worker's transition is kept in memory (`is_kept_on_failure`: the worker saves it on
        its retry, since it may hold a tool's outcome); a client's transition (approve,
        cancel) is dropped, so memory equals the store and the client can retry."""
        state = live.state
        events = state.trace[live.num_saved:]
        try:
            self.store.save_step(state.run_id, state, events, token=live.fence.token)
        except Exception:
            if not is_kept_on_failure:
                self._reload(live)
            raise
        if self.observers.on_saved is not None:
            self.observers.on_saved(state.run_id, events)
        live.num_saved = len(state.trace)
        live.is_dirty = False

    def _let_go(self, session_id: str, reason: str, *, is_released: bool) -> None:
        """The one way a worker stops holding a session it did not finish: out of memory (the
        store has it), and with `is_released` its lease handed back for an immediate claim."""
        log.info("session %s: %s", session_id, reason)
        live = self.live.deactivate(session_id, is_forgotten=True)
        if is_released and live is not None and self.store.is_shared:
            try:
                self.store.release_session(session_id, live.fence.token)
            except Exception:  # it expires instead
                log.warning("could not release session %s", session_id, exc_info=True)

    def _reload(self, live: LiveSession) -> None:
        record = self.store.load_session(live.session_id)
        if record is not None:
            live.state = record.state
            live.num_saved = len(record.state.trace)
        live.is_dirty = False

    def _auto_approve(self, live: LiveSession) -> bool:
        state, pending = live.state, live.state.pending
        if (state.status is RunStatus.PAUSED and live.row.is_auto_approve
                and pending is not None and pending.is_gated
                and not pending.is_waiting_for_values):
            live.machine.approve(state, pending.digest)
            return True
        return False

    def _transition(self, live: LiveSession) -> None:
        state = live.state
        num_events = len(state.trace)
        # This worker thread runs outside any request, so no trace context reached it: set
        # the one the step's engine calls forward (a remote engine's traceparent header).
        token = TRACEPARENT.set(self._traceparent(state))
        try:
            request = None
            if state.pending is None:  # the next step is a routing call: the same limits,
                # on the very request the step then routes (its prompt rendered once)
                request = check_prompt_limits(self.engine, live.machine, state,
                                              self.prompt_limits)
            live.machine.step(state, request)
        except RoutingLimitError as e:
            fail_run(state, str(e))
        except (StoreBusyError, LeaseLostError):
            raise  # the store is busy (the worker retries the step) or the lease is lost
        except Exception as e:  # an engine failure or our bug: the session ends, recorded
            log.exception("session %s failed at step %d", state.run_id, state.num_steps)
            fail_run(state, f"{type(e).__name__}: {e}")
        finally:
            TRACEPARENT.reset(token)
        on_routing_call = self.observers.on_routing_call
        if on_routing_call is not None:
            for event in state.trace[num_events:]:
                if event.kind is EventKind.ROUTE:
                    on_routing_call(routing_outcome(live.machine.tree, event),
                                    Usage.from_dict(dict(event.usage or {})))

    def _traceparent(self, state: RunState) -> str | None:
        """The trace context of the frame the next step runs in, when telemetry is on."""
        if self.observers.step_traceparent is None:
            return None
        return self.observers.step_traceparent(state.run_id,
                                               state.top().frame_id if state.stack else None)
