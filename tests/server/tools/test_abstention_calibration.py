"""Fitting the abstention check on an operator's dev queries (`calibrate --abstention`): the
probe at the evidence's first leaf, its labels, and a model-free fit that weighs only the
features that ask no model."""

from __future__ import annotations

import pytest
from recovery_kit import evidence_source
from stackroute.runtime.catalog import build_tree
from stackroute.runtime.errors import InputError
from stackroute.server.tools.abstention_calibration import calibrate_abstention
from stackroute.server.tools.abstention_fit import MODEL_FEATURES, Label
from stackroute.server.tools.evaluate import Query

CATALOG = {"name": "shop", "description": "A shop.", "children": [
    {"name": f"{verb}_{thing}", "description": f"{verb} {thing} for a customer"}
    for verb in ("order", "return", "track") for thing in ("shoes", "coat", "hat", "scarf")]}


def _query(n: int, text: str, gold: str | None) -> Query:
    return Query(id=str(n), query=text, gold=(gold,) if gold else (), args=None, tags=())


IN_SCOPE = [("order shoes please", "order_shoes"), ("return the coat", "return_coat"),
            ("track my hat", "track_hat"), ("order a scarf", "order_scarf"),
            ("return hat", "return_hat"), ("track scarf delivery", "track_scarf")]
OUT_OF_SCOPE = ["sing a song", "what a lovely sunny morning", "tell me a joke",
                "the capital of peru", "how tall is everest"]


def test_a_model_free_probe_fits_on_model_free_features_only() -> None:
    tree = build_tree(CATALOG)
    queries = [_query(n, t, g) for n, (t, g) in enumerate(IN_SCOPE)] + \
        [_query(10 + n, t, None) for n, t in enumerate(OUT_OF_SCOPE)]
    fitted = calibrate_abstention(None, evidence_source(tree), tree, queries,
                                  max_call_loss=0.0)
    labels = [s.label for s in fitted.samples]
    assert labels.count(Label.ABSTAIN) == 5 and labels.count(Label.CALL) == 6
    assert fitted.model_calls == 0
    assert not set(MODEL_FEATURES) & {f for r in fitted.choice for f in r.features}
    options = fitted.fitted.options
    assert not options.is_judge_enabled
    assert not any(options.abstains(s.features) for s in fitted.samples
                   if s.label is Label.CALL)
    assert fitted.measured()["dev_out_of_scope_stopped"] > 0.5


def test_too_few_right_first_leaves_are_named() -> None:
    tree = build_tree(CATALOG)
    queries = [_query(n, t, "order_shoes") for n, (t, _) in enumerate(IN_SCOPE[1:])] + \
        [_query(10 + n, t, None) for n, t in enumerate(OUT_OF_SCOPE)]
    with pytest.raises(InputError, match="5 in-scope dev queries whose best evidence leaf "
                                         r"is their gold leaf; got 0 of 5"):
        calibrate_abstention(None, evidence_source(tree), tree, queries, max_call_loss=0.0)
