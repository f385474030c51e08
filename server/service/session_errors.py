"""The errors the session service raises to its callers (each maps to an HTTP status)."""

from __future__ import annotations

from stackroute.runtime.errors import InputError, StateError
from stackroute.server.service.engine_queue import QueueFullError


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


class SessionEndedError(StateError):
    """The session is no longer running or paused (done, cancelled, …): nothing to load."""


class CatalogUnavailableError(StateError):
    """This instance cannot load the catalog a session needs (deleted, refused by its handler
    allowlist, or not loadable by this version during a rolling upgrade). The session is
    not this instance's to end: a takeover releases it for an instance that can run it."""
