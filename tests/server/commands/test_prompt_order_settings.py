"""The prompt order and warm-on-load settings (issue 29) reach the router options from the
settings, the environment and the command line; a bad value names the values it takes."""

from __future__ import annotations

import pytest
from stackroute.runtime.errors import InputError
from stackroute.runtime.prompt import PromptOrder
from stackroute.server.commands.common import RoutingFlags
from stackroute.server.routing.prefix_warming import WarmScope
from stackroute.server.settings import ServerSettings, SettingsError


def test_the_setting_and_the_environment_reach_the_router_options(
        monkeypatch: pytest.MonkeyPatch) -> None:
    default = ServerSettings().prompt_order
    assert ServerSettings(policy="plain").router_options("m").prompt_order is default
    other = next(o for o in PromptOrder if o is not default)
    assert ServerSettings.load(prompt_order=other.value, policy="plain").router_options(
        "m").prompt_order is other
    monkeypatch.setenv("STACKROUTE_PROMPT_ORDER", other.value)
    monkeypatch.setenv("STACKROUTE_WARM_ON_LOAD", "all")
    settings = ServerSettings.load(policy="plain")
    assert settings.router_options("m").prompt_order is other
    assert settings.warm_on_load is WarmScope.ALL


def test_bad_values_say_what_is_expected() -> None:
    with pytest.raises(SettingsError, match=r"request-first.*menu-first"):
        ServerSettings.load(prompt_order="sideways")
    with pytest.raises(InputError, match="--prompt-order must be one of request-first, "
                                         "menu-first; got 'sideways'"):
        RoutingFlags.parse(policy=None, calibration=None, prompt_order="sideways")


def test_the_command_line_flag_sets_the_order() -> None:
    flags = RoutingFlags.parse(policy="plain", calibration=None, prompt_order="menu-first")
    assert flags.prompt_order is PromptOrder.MENU_FIRST
    assert RoutingFlags.parse(policy="plain", calibration=None).prompt_order is None
