"""The sides `stackroute bench shared-prompt` compares, as router options built by the
product's own builders (`calibration.router_options`, and `RoutingFlags.options_for` for the
product as `stackroute eval` runs it) with explicit overrides: no default is copied here.

- `shortlist`: every menu in full vs inner menus shortlisted, one side per margin;
- `order`: the root's menu after the request vs before it (shortlists off on both);
- `release`: the product before issue 29 (`before`: request-first, every menu in full, argument
  values chosen by the model), issue 29's prompt changes alone (`layout`: menu-first and
  shortlists, argument values still the model's) and the product now (`now`: exactly what
  `stackroute eval` routes with, the model's calibration included, e.g. SmolLM2's argument
  values from the candidates' priors).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any

from stackroute.runtime.prompt import PromptOrder
from stackroute.server.routing.options import ArgumentValues, RouterOptions


class Comparison(StrEnum):
    SHORTLIST = "shortlist"
    ORDER = "order"
    RELEASE = "release"


@dataclass(frozen=True)
class SideSpec:
    """One side of a comparison: its label and the options its router is built with."""

    label: str
    options: RouterOptions


def product_options(engine: Any) -> RouterOptions:
    """The options `stackroute eval` routes with on `engine` when no routing flag is given."""
    from stackroute.server.commands.common import RoutingFlags

    return RoutingFlags.parse(policy=None, calibration=None).options_for(engine)


def side_specs(compare: Comparison, engine: Any, margins: Sequence[float]) -> list[SideSpec]:
    """The sides of `compare` for the model `engine` serves (`engine.info.model`)."""
    from stackroute.server.routing.calibration import router_options

    model = engine.info.model
    if compare is Comparison.ORDER:
        return [SideSpec(o.value, router_options(model, prompt_order=o, shortlist=False))
                for o in (PromptOrder.REQUEST_FIRST, PromptOrder.MENU_FIRST)]
    if compare is Comparison.RELEASE:
        return [
            SideSpec("before", router_options(model, prompt_order=PromptOrder.REQUEST_FIRST,
                                              shortlist=False,
                                              argument_values=ArgumentValues.MODEL)),
            SideSpec("layout", router_options(model, prompt_order=PromptOrder.MENU_FIRST,
                                              shortlist=True,
                                              argument_values=ArgumentValues.MODEL)),
            SideSpec("now", product_options(engine))]
    return [SideSpec("full", router_options(model, shortlist=False))] + [
        SideSpec(f"shortlist-{m:g}", router_options(model, shortlist=True, shortlist_margin=m))
        for m in margins]


def differing_fields(a: RouterOptions, b: RouterOptions) -> set[str]:
    """The option fields in which `a` and `b` differ."""
    return {f.name for f in fields(RouterOptions) if getattr(a, f.name) != getattr(b, f.name)}


def describe(options: RouterOptions) -> dict[str, Any]:
    """What a summary records about how a side routed."""
    shortlist = options.shortlist
    return {**options.describe(), "prompt_order": options.prompt_order.value,
            "shortlist": None if shortlist is None else
            {"margin": shortlist.margin, "max_options": shortlist.max_options},
            "argument_values": options.argument_values.value}
