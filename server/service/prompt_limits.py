"""The server's bounds on one routing call (menu size, prompt tokens), checked the same way
for `/v1/route` and for every step of a session before the model sees the prompt."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from stackroute.runtime.errors import InputError
from stackroute.runtime.machine import StackMachine
from stackroute.runtime.router import RoutingRequest
from stackroute.runtime.state import RunState
from stackroute.server.engines.base import Engine

if TYPE_CHECKING:
    from stackroute.server.settings import ServerSettings


class RoutingLimitError(InputError):
    """A routing call over the server's menu or prompt limits."""

    code = "routing_limit"
    http_status = 422


def _setting(name: str) -> int | None:
    from stackroute.server.settings import ServerSettings

    value: int | None = ServerSettings.default(name)
    return value


@dataclass(frozen=True, kw_only=True)
class PromptLimits:
    """None: no limit. Without arguments, the product's (settings.py)."""

    max_menu_options: int | None = field(default_factory=lambda: _setting("max_menu_options"))
    max_prompt_tokens: int | None = field(
        default_factory=lambda: _setting("max_prompt_tokens"))

    @classmethod
    def from_settings(cls, settings: ServerSettings) -> PromptLimits:
        return cls(max_menu_options=settings.max_menu_options,
                   max_prompt_tokens=settings.max_prompt_tokens)


def check_prompt_limits(engine: Engine, machine: StackMachine, run: RunState,
                        limits: PromptLimits) -> RoutingRequest:
    """The next routing request of `run` (its top frame's menu and the prompt `engine` would
    read), rendered once: raise `RoutingLimitError` when it is over `limits`, else return it
    for `machine.step(run, request)`, which then does not render it again."""
    request = machine.request_for(run)
    check_request_limits(engine, request, limits)
    return request


def check_request_limits(engine: Engine, request: RoutingRequest,
                         limits: PromptLimits) -> None:
    """Raise `RoutingLimitError` when `request`'s menu or prompt is over `limits`."""
    menu = request.menu
    max_menu = limits.max_menu_options
    if max_menu is not None and len(menu.options) > max_menu:
        raise RoutingLimitError(f"the menu at {menu.node_path or '<root>'} has "
                                f"{len(menu.options)} options; the limit is {max_menu}")
    max_tokens = limits.max_prompt_tokens
    if max_tokens is not None:
        num_tokens = engine.count_tokens(request.prompt)
        if num_tokens > max_tokens:
            raise RoutingLimitError(f"the routing prompt has {num_tokens} tokens; the limit "
                                    f"is {max_tokens}")
