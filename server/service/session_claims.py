"""Lease claims over a shared store: how a session comes to be held by this instance, and how
it is let go.

A session is held under the token its claim returned, and every write after the claim carries
that token, never one read again later: between a claim and the load another instance may
have claimed the session (this one's claim lapsed during a slow takeover, or a client's
cancel went through another instance), and a token read then would be that instance's, so
both would write as the lease holder. With the claim's own token, the stale instance's first
write is refused (`LeaseLostError`) and it drops the session.

A claimant that cannot load a session's catalog (deleted, refused by this instance's handler
allowlist, unknown to this version during a rolling upgrade) releases the session for an
instance that can run it; it never ends another instance's session. Over an embedded store
(SQLite, one process) a claim is always granted with token 0.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from stackroute.runtime.errors import StateError
from stackroute.runtime.governance import Limits, RunStatus
from stackroute.runtime.machine import StackMachine
from stackroute.runtime.tree import CapabilityTree
from stackroute.server.service.catalog_registry import CatalogRegistry
from stackroute.server.service.live_sessions import LiveSession, LiveSessions
from stackroute.server.service.outcomes import fail_run
from stackroute.server.service.session_errors import CatalogUnavailableError, SessionEndedError
from stackroute.server.service.session_events import UnknownSessionError
from stackroute.server.service.store_executor import Fence
from stackroute.server.service.store_protocol import StoreBackend
from stackroute.server.service.store_records import Claim, LeaseLostError

log = logging.getLogger(__name__)

CLAIM_WAIT_S = 3.0  # a client's approve waits this long for another instance's lease to end
CLAIM_POLL_S = 0.05
# (tree, is_flat, limits, fence) -> the machine a session runs on, its leaf calls fenced
MachineFactory = Callable[[CapabilityTree, bool, Limits, Fence], StackMachine]


class SessionClaims:
    def __init__(self, store: StoreBackend, live: LiveSessions, catalogs: CatalogRegistry, *,
                 owner: str, machine: MachineFactory) -> None:
        self.store = store
        self.live = live
        self.catalogs = catalogs
        self.owner = owner  # this instance, as a lease owner
        self.machine = machine

    def for_client(self, session_id: str, *, is_forced: bool = False) -> LiveSession:
        """The session a client's approve, reject or cancel acts on. Over a shared store it is
        claimed and loaded (another instance may have advanced it), unless this instance's
        own worker holds it; `is_forced` (cancel) takes the lease from a live holder, whose
        next write is then refused. A claim that cannot be loaded is let go at once."""
        live, is_ours = self.live.lookup(session_id)
        if live is not None and (is_ours or not self.store.is_shared):
            return live
        if not self.store.is_shared:
            return self.load(Claim(session_id, 0))
        deadline = time.monotonic() + CLAIM_WAIT_S
        while (token := self.store.claim_session(session_id, self.owner,
                                                 lease_s=self.store.lease_s,
                                                 is_forced=is_forced)) is None:
            if self.store.session_row(session_id) is None:
                raise UnknownSessionError(f"no session {session_id!r}")
            if time.monotonic() > deadline:
                raise StateError(f"session {session_id} is being advanced by another "
                                 "instance; retry")
            time.sleep(CLAIM_POLL_S)
        claim = Claim(session_id, token)
        try:
            return self.load(claim)
        except BaseException:
            self.release(claim)
            raise

    def take_over(self, schedule: Callable[[str], None]) -> list[str]:
        """Claim the running sessions nobody holds (over SQLite: every running one, left by a
        stopped process), load each under its claim's token and schedule it; return the ids
        resumed."""
        if self.live.is_closing:
            return []
        resumed: list[str] = []
        for claim in self.store.claim_expired(self.owner, lease_s=self.store.lease_s,
                                              limit=-1):
            try:
                live = self.load(claim)
            except SessionEndedError:  # finished or cancelled elsewhere since the claim
                continue
            except CatalogUnavailableError as e:
                log.warning("session %s: %s; released for an instance that can run it",
                            claim.session_id, e)
                self.release(claim, retry_after_s=self.store.lease_s)
                continue
            except Exception as e:  # a stored state this code cannot read: it ends, recorded
                self.fail_stored(claim, f"cannot resume: {type(e).__name__}: {e}")
                continue
            log.info("resuming session %s at transition %d", claim.session_id, live.num_saved)
            schedule(claim.session_id)
            resumed.append(claim.session_id)
        return resumed

    def load(self, claim: Claim) -> LiveSession:
        """Load the session from the store into memory under `claim` (it replaces what memory
        held, which another instance may have made stale)."""
        session_id = claim.session_id
        record = self.store.load_session(session_id)
        if record is None:
            raise UnknownSessionError(f"no session {session_id!r}")
        if record.row.status.is_final:
            raise SessionEndedError(f"session {session_id} is {record.row.status.value}")
        try:
            entry = self.catalogs.get(record.row.catalog_id)
        except Exception as e:  # deleted, not allowed here, or not loadable by this version
            raise CatalogUnavailableError(
                f"session {session_id} needs catalog {record.row.catalog_id!r}, which this "
                f"instance cannot load ({e})") from e
        fence = Fence(session_id, claim.token)
        machine = self.machine(entry.tree, record.row.is_flat, record.state.limits, fence)
        return self.live.adopt(LiveSession(row=record.row, state=record.state,
                                           machine=machine, num_saved=len(record.state.trace),
                                           fence=fence))

    def settle(self, live: LiveSession, schedule: Callable[[str], None]) -> None:
        """After a client's request failed over a shared store: the lease it claimed must not
        stay with an instance that is not advancing the session (its keeper would renew it
        forever). A running session is advanced here; any other lets the lease go."""
        if not self.store.is_shared:
            return
        if live.state.status is RunStatus.RUNNING:
            schedule(live.session_id)
        elif not self.live.is_active(live.session_id):
            self.release(Claim(live.session_id, live.fence.token))

    def release(self, claim: Claim, *, retry_after_s: float = 0.0) -> None:
        """Hand the lease back (a no-op once another claim superseded `claim`)."""
        if not self.store.is_shared:
            return
        if not self.live.is_active(claim.session_id):  # this instance's worker keeps its own
            self.live.forget(claim.session_id)
        try:
            self.store.release_session(claim.session_id, claim.token,
                                       retry_after_s=retry_after_s)
        except Exception:  # it expires instead: keepers renew running sessions only
            log.warning("could not release session %s", claim.session_id, exc_info=True)

    def fail_stored(self, claim: Claim, message: str) -> None:
        """End a stored session this instance cannot resume, under `claim`'s token: if another
        instance claimed it since (and perhaps cancelled or finished it), nothing is written."""
        record = self.store.load_session(claim.session_id)
        if record is None:
            return
        log.warning("session %s %s", claim.session_id, message)
        num_saved = len(record.state.trace)
        fail_run(record.state, message)
        try:
            self.store.save_step(claim.session_id, record.state,
                                 record.state.trace[num_saved:], token=claim.token)
        except LeaseLostError:
            log.info("session %s: claimed by another instance since; left to it",
                     claim.session_id)
