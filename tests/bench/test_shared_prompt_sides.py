"""`stackroute bench shared-prompt`'s sides: built by the product's option builders, differing
from each other in exactly the fields each comparison is about."""

from __future__ import annotations

from types import SimpleNamespace

from stackroute.bench.experiments.shared_prompt_sides import (
    Comparison,
    differing_fields,
    product_options,
    side_specs,
)
from stackroute.runtime.prompt import PromptOrder
from stackroute.server.routing.calibration import router_options
from stackroute.server.routing.options import ArgumentValues

SMOLLM2 = "SmolLM2-135M-Instruct.Q4_1"  # the default model; its calibration ships
ENGINE = SimpleNamespace(info=SimpleNamespace(model=SMOLLM2))


def test_release_sides_differ_in_exactly_the_issue_29_fields_then_the_calibration() -> None:
    before, layout, now = side_specs(Comparison.RELEASE, ENGINE, [])
    assert (before.label, layout.label, now.label) == ("before", "layout", "now")
    assert differing_fields(before.options, layout.options) == {"prompt_order", "shortlist"}
    assert before.options.prompt_order is PromptOrder.REQUEST_FIRST
    assert before.options.shortlist is None
    assert layout.options.prompt_order is PromptOrder.MENU_FIRST
    assert layout.options.shortlist is not None
    assert {before.options.argument_values, layout.options.argument_values} == {
        ArgumentValues.MODEL}
    # `now` is the product as `stackroute eval` builds it; for SmolLM2 its calibration picks
    # argument values from the candidates' priors, the one field it changes over `layout`
    assert now.options == product_options(ENGINE) == router_options(SMOLLM2)
    assert differing_fields(layout.options, now.options) == {"argument_values"}
    assert now.options.argument_values is ArgumentValues.PRIORS


def test_order_and_shortlist_sides_change_one_field_each() -> None:
    request_first, menu_first = side_specs(Comparison.ORDER, ENGINE, [])
    assert differing_fields(request_first.options, menu_first.options) == {"prompt_order"}
    assert request_first.options.shortlist is None is menu_first.options.shortlist
    full, *shortlisted = side_specs(Comparison.SHORTLIST, ENGINE, [0.05, 0.08])
    assert [s.label for s in shortlisted] == ["shortlist-0.05", "shortlist-0.08"]
    assert full.options.shortlist is None
    assert [s.options.shortlist.margin for s in shortlisted if s.options.shortlist] == [
        0.05, 0.08]
    assert all(differing_fields(full.options, s.options) == {"shortlist"}
               for s in shortlisted)
