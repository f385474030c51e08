"""Structured logs: one JSON object per line, with any `extra=` fields as top-level keys.

>>> import logging
>>> record = logging.LogRecord("x", logging.INFO, "f.py", 1, "request", None, None)
>>> record.status = 200
>>> JsonFormatter().format(record).startswith('{"ts":')
True
"""

from __future__ import annotations

import json
import logging
import logging.config
from datetime import UTC, datetime
from typing import Any

from stackroute.server.redaction import redact_secrets

# Attributes every LogRecord has; anything else on a record came from `extra=`.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message", "asctime", "taskName", "color_message"}  # uvicorn's ANSI-coloured duplicate


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["traceback"] = self.formatException(record.exc_info)
        # Every line leaves through here: no URL password or secret parameter in it, whatever
        # a message, an extra field or a chained exception quoted (server/redaction.py).
        return redact_secrets(json.dumps(out, ensure_ascii=False, default=str))


def logging_config(level: str) -> dict[str, Any]:
    """A `logging.config.dictConfig` for the server process (also handed to uvicorn)."""
    handler = {"class": "logging.StreamHandler", "formatter": "json",
               "stream": "ext://sys.stderr"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": f"{__name__}.JsonFormatter"}},
        "handlers": {"stderr": handler},
        "root": {"handlers": ["stderr"], "level": level.upper()},
        "loggers": {
            # Our access lines replace uvicorn's (they carry the request id and latency).
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
            "uvicorn": {"handlers": [], "level": level.upper(), "propagate": True},
            "uvicorn.error": {"handlers": [], "level": level.upper(), "propagate": True},
        },
    }


def configure_logging(level: str) -> None:
    logging.config.dictConfig(logging_config(level))
