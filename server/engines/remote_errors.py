"""What the remote engine raises when its upstream server fails or misbehaves: neither the user's
input nor our bug, so each is a gateway answer (`http_status`), with the upstream's words.

>>> RemoteTimeoutError("no answer within 120 s").http_status
504
>>> busy = RemoteUnavailableError("HTTP 503", last_status=503, retry_after_s=2.0)
>>> busy.http_status, busy.is_overloaded, busy.retry_after_s
(503, True, 2.0)
>>> RemoteUnavailableError("HTTP 504", last_status=504, retry_after_s=2.0).http_status
502
"""

from __future__ import annotations

from stackroute.server.engines.base import EngineError
from stackroute.server.redaction import redact_secrets

OVERLOADED_STATUS = frozenset({429, 503})  # "busy, come back later", as opposed to broken


class RemoteEngineError(EngineError):
    """The remote server failed or misbehaved: neither the user's input nor our bug."""

    code = "remote_engine_error"
    http_status = 502

    def __init__(self, message: str) -> None:
        # Messages name the URL they tried, and a base URL may carry `user:password@`: the
        # password never reaches a client or a log line (server/redaction.py).
        super().__init__(redact_secrets(message))


class RemoteUnavailableError(RemoteEngineError):
    """No answer after every retry (connection refused, 429/502/503/504 throughout).
    `last_status` is the upstream's last HTTP status (None: no response at all) and
    `retry_after_s` the `Retry-After` it sent with it, in seconds, if any. `is_overloaded`:
    the upstream is busy rather than broken (it said 429 or 503, or every pooled connection
    to it is in use); then the answer is a 503, else a 502."""

    code = "remote_unavailable"

    def __init__(self, message: str, *, last_status: int | None = None,
                 retry_after_s: float | None = None, is_overloaded: bool | None = None) -> None:
        self.last_status = last_status
        self.retry_after_s = retry_after_s
        self.is_overloaded = last_status in OVERLOADED_STATUS if is_overloaded is None \
            else is_overloaded
        if self.is_overloaded:
            self.http_status = 503
        super().__init__(message)


class RemoteTimeoutError(RemoteEngineError):
    """The upstream did not answer within `RemoteOptions.timeout_s` (not retried)."""

    code = "remote_timeout"
    http_status = 504


class RemoteRejectedError(RemoteEngineError):
    """The server refused the request (a 4xx other than 429)."""

    code = "remote_rejected"

    def __init__(self, message: str, *, status: int) -> None:
        self.status = status
        super().__init__(message)


class RemoteFeatureError(RemoteEngineError):
    """The server lacks something this engine needs (it ignored `structured_outputs`, sent
    no logprobs, refused a field), so its answers cannot be trusted as menu decisions."""

    code = "remote_feature_missing"
