"""An instance's part in sharing sessions through a shared store: keep its leases alive and
take over the sessions of instances that stopped.

Two loops on their own threads, so neither waits for the other. Every `lease_s / 3` seconds
the renewer extends every lease this instance holds (one UPDATE); on the same period the
taker claims running sessions whose lease expired (their instance died, SIGKILL or a lost
machine, or lost the database for longer than a lease) and loads and schedules them. A
takeover can take long (every session loaded, catalogs compiled), and renewal never waits for
it: a live instance keeps its leases however long a takeover, a routing call or a handler
runs, as long as it reaches the database. If it cannot, its lease runs out, another instance
claims the session with a new fencing token, and the stale instance's writes are refused.
A crashed instance's sessions resume elsewhere within about `lease_s * 4/3` seconds.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from stackroute.server.service.store_protocol import StoreBackend

log = logging.getLogger(__name__)


class LeaseKeeper:
    def __init__(self, store: StoreBackend, owner: str, *, lease_s: float,
                 take_over: Callable[[], object]) -> None:
        self.store = store
        self.owner = owner
        self.lease_s = lease_s
        self.interval_s = lease_s / 3
        self.take_over = take_over  # claims and schedules expired sessions
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._every_interval, args=(self._renew, "renewing"),
                             name="lease-renewer", daemon=True),
            threading.Thread(target=self._every_interval, args=(self.take_over, "taking over"),
                             name="lease-taker", daemon=True)]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def close(self) -> None:
        self._stop.set()
        for thread in self._threads:
            if thread.ident is not None:  # started
                thread.join(timeout=10)

    def _renew(self) -> None:
        self.store.renew_leases(self.owner, lease_s=self.lease_s)

    def _every_interval(self, action: Callable[[], object], what: str) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                action()
            except Exception:  # the database is away: try again next tick, never stop
                log.warning("lease keeper: %s failed", what, exc_info=True)
