"""One routing plan, whatever the entry point: the routers `stackroute run`/`eval`, `stackroute
route`, `/v1/route`, sessions and chat build for one engine are configured identically from
the settings' defaults (issue 24.3), and the plan lists the step sources route() walks."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from session_kit import BANK_CATALOG
from stackroute.runtime.catalog import build_tree
from stackroute.server.commands.common import RoutingFlags
from stackroute.server.engines.base import EngineInfo, MenuResult, PromptInput
from stackroute.server.engines.verification import MenuLevel, PathLevel
from stackroute.server.routing.options import DraftSource, Policy, RouterOptions
from stackroute.server.routing.plan import RoutingPlan, StepSource
from stackroute.server.routing.pool import RouterPool
from stackroute.server.routing.recovery import RecoveryOptions
from stackroute.server.routing.router import build_machine
from stackroute.server.service.prompt_limits import PromptLimits
from stackroute.server.service.route_call import RouteContext
from stackroute.server.service.services import Services
from stackroute.server.service.session_options import SessionOptions
from stackroute.server.settings import ServerSettings

CALIBRATED = "SmolLM2-135M-Instruct.Q4_1"  # the embedded model: a calibration ships for it


class Verifying:
    """Just enough engine to be built on: it can verify paths and levels (so the plan may
    speculate and unwind); nothing here routes."""

    def __init__(self, model: str = "no-calibration") -> None:
        self.info = EngineInfo(engine="fake", model=model, max_context_tokens=1 << 16)

    def count_tokens(self, prompt: PromptInput) -> int:
        return 1

    def choose(self, prompt: Any, options: Sequence[str], **_: Any) -> MenuResult:
        raise AssertionError("no routing here")

    def verify_path(self, levels: Sequence[PathLevel]) -> list[MenuResult]:
        raise AssertionError("no routing here")

    def verify_levels(self, levels: Sequence[MenuLevel]) -> list[MenuResult]:
        raise AssertionError("no routing here")


def cli_options(engine: Verifying) -> RouterOptions:
    """`run`/`eval`/`route` with no routing flags."""
    return RoutingFlags.parse(policy=None, calibration=None).options_for(engine)


def test_every_entry_point_builds_the_same_plan(tmp_path: Path) -> None:
    engine = Verifying()
    tree = build_tree(BANK_CATALOG)
    cli = build_machine(tree, engine, options=cli_options(engine))  # type: ignore[arg-type]
    route = RouteContext.for_engine(engine, cli_options(engine))  # type: ignore[arg-type]
    services = Services.open(ServerSettings(db=str(tmp_path / "s.db")), engine)  # type: ignore[arg-type]
    try:
        served = services.route_context.routers
        # sessions and chat (tool_runs) route through the very pool `/v1/route` uses
        assert services.sessions.routers is served
        routers = {"run/eval": cli.router, "route": route.routers.router(tree),
                   "/v1/route, sessions, chat": served.router(tree),
                   "no options (build_machine)": build_machine(tree, engine).router,  # type: ignore[arg-type]
                   "no options (RouterPool)": RouterPool(engine).router(tree)}  # type: ignore[arg-type]
        plans = {name: router.plan for name, router in routers.items()}
        options = {name: router.options for name, router in routers.items()}
        assert len(set(plans.values())) == 1, {n: p.describe() for n, p in plans.items()}
        assert len(set(options.values())) == 1, options
        [plan] = set(plans.values())
        assert plan.sources == (StepSource.MEMO, StepSource.SPECULATION, StepSource.PLAIN)
        assert plan.drafts is DraftSource.ROUTES  # the settings' default speculation
        assert services.route_context.limits == route.limits == PromptLimits()
    finally:
        services.close()


def test_a_calibrated_model_routes_guided_everywhere() -> None:
    engine = Verifying(CALIBRATED)
    settings = ServerSettings().router_options(CALIBRATED)
    cli = cli_options(engine)
    assert cli == settings == RouterPool(engine).options  # type: ignore[arg-type]
    plan = RoutingPlan.for_engine(cli, engine)
    assert plan.sources == (StepSource.GUIDED,) and plan.prefetches_paths
    assert plan.policy is Policy.GUIDED and plan.needs_evidence


def test_options_without_arguments_are_the_products_or_do_not_exist() -> None:
    with pytest.raises(TypeError):
        RouterOptions()  # type: ignore[call-arg]
    options = RouterOptions(recovery=None, speculation=DraftSource.OFF)
    assert options.max_argument_tokens == ServerSettings.default("max_argument_tokens")
    assert options.unwinding == ServerSettings.default("unwinding")
    defaults = SessionOptions()
    assert defaults == SessionOptions.from_settings(ServerSettings())
    assert defaults.leaf_isolation == "process"
    assert (defaults.max_menu_options, defaults.max_prompt_tokens,
            defaults.max_session_steps) == (512, 8192, 200)
    assert PromptLimits() == PromptLimits.from_settings(ServerSettings())


@pytest.mark.parametrize(("options", "paths", "levels", "flat", "sources"), [
    (RouterOptions(recovery=None, speculation=DraftSource.OFF), True, True, False,
     (StepSource.PLAIN,)),
    (RouterOptions(recovery=None, speculation=DraftSource.EVIDENCE, unwinding=True), True,
     True, False, (StepSource.MEMO, StepSource.UNWINDING, StepSource.SPECULATION,
                   StepSource.PLAIN)),
    # an engine that cannot verify paths (vLLM, remote) routes step by step
    (RouterOptions(recovery=None, speculation=DraftSource.ROUTES), False, False, False,
     (StepSource.PLAIN,)),
    # the flat twin has one menu: nothing to draft
    (RouterOptions(recovery=None, speculation=DraftSource.ROUTES), True, True, True,
     (StepSource.PLAIN,)),
    # guided: one source, whatever else is asked (unwinding is the plain policy's)
    (RouterOptions(recovery=RecoveryOptions.off(), speculation=DraftSource.OFF,
                   unwinding=True), True, True, False, (StepSource.GUIDED,)),
])
def test_the_plan_lists_only_the_sources_that_can_run(
        options: RouterOptions, paths: bool, levels: bool, flat: bool,
        sources: tuple[StepSource, ...]) -> None:
    plan = RoutingPlan.build(options, can_verify_paths=paths, can_verify_levels=levels,
                             is_flat=flat)
    assert plan.sources == sources
    assert plan.needs_evidence == (options.speculation is DraftSource.EVIDENCE and paths
                                   and not flat)
