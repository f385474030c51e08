"""What every session store holds and raises, whichever database it is: the records it hands
back, the errors it classifies (so the service never imports a database driver to tell a busy
store from a bug), and the JSON and text every backend writes the same way."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Protocol

from stackroute.runtime.errors import StackrouteError
from stackroute.runtime.governance import RunStatus
from stackroute.runtime.state import RunState


class DbRow(Protocol):
    """A row read by column name: an `sqlite3.Row` or a psycopg dict row."""

    def __getitem__(self, column: str) -> Any: ...


# -- errors: each store turns its driver's errors into these -------------------------------------
class StoreUnavailableError(StackrouteError):
    """The database cannot be used safely (not in WAL mode, say): the service does not start."""


class StoreBusyError(StackrouteError):
    """The database cannot be reached or is busy for now (SQLite's lock past the busy timeout,
    PostgreSQL unreachable): nothing was written, and the write can be retried."""


class LeaseLostError(StackrouteError):
    """This instance no longer holds the session's lease (another took it over): whatever it
    was about to write for the session is not written, and it stops working on it."""


class DuplicateRecordError(StackrouteError):
    """A row with this key is already stored (a trace seq, a leaf call id)."""


class CatalogGoneError(StackrouteError):
    """The catalog a new session names is not in the store (another instance deleted it)."""


class CatalogInUseError(StackrouteError):
    """A catalog was not deleted: running or paused sessions use it (checked in the same
    transaction as the delete, so no session can be created on it in between)."""

    def __init__(self, catalog_id: str, num_active: int) -> None:
        super().__init__(f"catalog {catalog_id!r} is used by {num_active} running or paused "
                         "session(s); cancel them first")
        self.num_active = num_active


# -- records -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CatalogRecord:
    id: str
    name: str
    source: str
    format: str  # "json" | "yaml"
    created_unix: float


@dataclass(frozen=True)
class SessionRow:
    """A session's metadata, without its state."""

    id: str
    catalog_id: str
    status: RunStatus
    task: str
    is_flat: bool
    is_auto_approve: bool
    created_unix: float
    updated_unix: float

    @classmethod
    def from_row(cls, r: DbRow) -> SessionRow:
        return cls(id=r["id"], catalog_id=r["catalog_id"], status=RunStatus(r["status"]),
                   task=r["task"], is_flat=bool(r["is_flat"]),
                   is_auto_approve=bool(r["is_auto_approve"]),
                   created_unix=r["created_unix"], updated_unix=r["updated_unix"])


@dataclass(frozen=True)
class SessionRecord:
    row: SessionRow
    state: RunState  # with its whole trace, rebuilt from the transitions

    @classmethod
    def from_row(cls, r: DbRow, events: list[dict[str, Any]]) -> SessionRecord:
        """A `sessions` row (its `state` column holds the state without its trace) and the
        session's transitions, in order."""
        data = json.loads(r["state"])
        data["trace"] = events
        return cls(row=SessionRow.from_row(r), state=RunState.from_dict(data))


@dataclass(frozen=True)
class LeafExecution:
    """A leaf call by its idempotency key. `is_finished` is false while the handler runs (and
    forever, if the process died while it ran)."""

    call_id: str
    path: str
    digest: str
    is_finished: bool
    result: Any
    error: str | None

    @classmethod
    def from_row(cls, r: DbRow) -> LeafExecution:
        return cls(call_id=r["call_id"], path=r["path"], digest=r["digest"],
                   is_finished=bool(r["is_finished"]),
                   result=None if r["result"] is None else json.loads(r["result"]),
                   error=r["error"])


@dataclass(frozen=True)
class Claim:
    """A session's lease as a claim granted it: every write after the claim carries this
    token, never one read again later (another instance may have claimed it since)."""

    session_id: str
    token: int


# -- what every backend writes the same way ------------------------------------------------------
def strict_json(value: Any) -> str:
    """JSON that any parser reads: non-finite floats (a one-option menu's margin is infinite)
    become null instead of Python's non-standard `Infinity`/`NaN`; other objects become their
    `str`, as the stack machine does with leaf results."""
    return json.dumps(finite(value), ensure_ascii=False, allow_nan=False, default=str)


def finite(value: Any) -> Any:
    """`value` with every NaN or infinity replaced by None (JSON has neither)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def state_json(state: RunState) -> str:
    """A run's state without its trace (the `transitions` table holds that)."""
    data = state.to_dict()
    data["trace"] = []
    return strict_json(data)


def storable_text(text: str | None) -> str | None:
    """`text` as every backend can store it in a text column: NUL (which PostgreSQL refuses)
    becomes U+FFFD and unpaired surrogates (which UTF-8 cannot encode) become '?'.

    >>> storable_text("bad\\x00byte") == "bad\\ufffdbyte"
    True
    """
    if text is None:
        return None
    return text.replace("\x00", "\ufffd").encode("utf-8", "replace").decode("utf-8")
