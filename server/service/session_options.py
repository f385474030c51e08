"""How the session service runs tasks, as one frozen value built from the server settings.

`SessionOptions.from_settings` is the one place where `ServerSettings` becomes the service's
options, so the defaults are the settings' own (no second set of fallbacks here):

>>> from stackroute.server.settings import ServerSettings
>>> options = SessionOptions.from_settings(ServerSettings(max_session_workers=2))
>>> options.max_workers, options.leaf_isolation
(2, 'process')
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stackroute.server.settings import ServerSettings


def _setting(name: str) -> Any:
    """The product default of setting `name` (settings.py, read without the environment)."""
    from stackroute.server.settings import ServerSettings

    return ServerSettings.default(name)


def _default(name: str) -> Any:
    return field(default_factory=lambda: _setting(name))


@dataclass(frozen=True, kw_only=True)
class SessionOptions:
    """Without arguments, the product's defaults (each read from settings.py)."""

    max_session_steps: int | None = _default("max_session_steps")  # caps Limits.max_steps
    leaf_timeout_s: float = _default("leaf_timeout_s")
    leaf_isolation: str = _default("leaf_isolation")  # "process": killable worker processes
    allowed_handler_modules: tuple[str, ...] = ()
    max_workers: int = _default("max_session_workers")  # sessions stepped at the same time
    max_active: int = _default("max_active_sessions")  # running sessions; more is a 429
    poll_s: float = 1.0  # a watcher re-reads the store at least this often
    max_menu_options: int | None = _default("max_menu_options")  # over this fails the run
    max_prompt_tokens: int | None = _default("max_prompt_tokens")  # over this fails the run
    is_auto_approve_allowed: bool = True  # False: a session asking for auto_approve is a 403
    max_leaf_memory_bytes: int | None = field(  # address-space limit of a leaf process
        default_factory=lambda: _memory_bytes())

    @classmethod
    def from_settings(cls, settings: ServerSettings) -> SessionOptions:
        return cls(
            max_session_steps=settings.max_session_steps,
            leaf_timeout_s=settings.leaf_timeout_s,
            leaf_isolation=settings.leaf_isolation,
            allowed_handler_modules=tuple(settings.allowed_handler_modules),
            max_workers=settings.max_session_workers,
            max_active=settings.max_active_sessions,
            max_menu_options=settings.max_menu_options,
            max_prompt_tokens=settings.max_prompt_tokens,
            is_auto_approve_allowed=settings.is_auto_approve_allowed,
            max_leaf_memory_bytes=settings.max_leaf_memory_bytes,
        )


def _memory_bytes() -> int | None:
    mb = _setting("max_leaf_memory_mb")
    return None if mb is None else int(mb) << 20
