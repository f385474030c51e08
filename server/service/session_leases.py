"""An instance's part in sharing sessions through a shared store: keep its leases alive and
take over the sessions of instances that stopped.

Every `lease_s / 3` seconds the keeper renews every lease this instance holds (one UPDATE),
then asks the service to claim running sessions whose lease expired: their instance died
(SIGKILL, a lost machine) or lost the database for longer than a lease. So a crashed
instance's sessions resume elsewhere within about `lease_s * 4/3` seconds, and a live
instance never loses a session to the takeover, however long one routing call or handler
runs, as long as it reaches the database. If it cannot, its lease runs out, another instance
claims the session with a new fencing token, and the stale instance's writes are refused.
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
        self._thread = threading.Thread(target=self._run, name="lease-keeper", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:  # started
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.store.renew_leases(self.owner, lease_s=self.lease_s)
                self.take_over()
            except Exception:  # the database is away: try again next tick, never stop
                log.warning("lease keeper: renewing or taking over failed", exc_info=True)
