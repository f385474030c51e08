"""The server's bounds on one routing call (menu size, prompt tokens), checked the same way
for `/v1/route` and for every step of a session before the model sees the prompt."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from stackroute.runtime.errors import InputError
from stackroute.runtime.machine import StackMachine
from stackroute.runtime.state import RunState
from stackroute.server.engines.base import Engine

if TYPE_CHECKING:
    from stackroute.server.settings import ServerSettings


class RoutingLimitError(InputError):
    """A routing call over the server's menu or prompt limits."""

    code = "routing_limit"
    http_status = 422


@dataclass(frozen=True, kw_only=True)
class PromptLimits:
    max_menu_options: int | None = None
    max_prompt_tokens: int | None = None

    @classmethod
    def from_settings(cls, settings: ServerSettings) -> PromptLimits:
        return cls(max_menu_options=settings.max_menu_options,
                   max_prompt_tokens=settings.max_prompt_tokens)


def check_prompt_limits(engine: Engine, machine: StackMachine, run: RunState,
                        limits: PromptLimits) -> None:
    """Raise `RoutingLimitError` when the next routing call of `run` (its top frame's menu and
    the prompt `engine` would read) is over `limits`."""
    menu = machine.menu_for(run, run.top())
    max_menu = limits.max_menu_options
    if max_menu is not None and len(menu.options) > max_menu:
        raise RoutingLimitError(f"the menu at {menu.node_path or '<root>'} has "
                                f"{len(menu.options)} options; the limit is {max_menu}")
    max_tokens = limits.max_prompt_tokens
    if max_tokens is not None:
        num_tokens = engine.count_tokens(machine.layout.routing_prompt(run))
        if num_tokens > max_tokens:
            raise RoutingLimitError(f"the routing prompt has {num_tokens} tokens; the limit "
                                    f"is {max_tokens}")
