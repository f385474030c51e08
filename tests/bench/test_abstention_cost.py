"""`stackroute bench abstention-cost`: a model-free check judged on a suite's own requests
(the evidence over the bag-of-words double; the real embedder runs in the smoke)."""

from __future__ import annotations

import pytest
from doubles import LogitEngine, WordEmbedder
from stackroute.bench.experiments.abstention_cost import judge_suite
from stackroute.runtime.catalog import build_tree
from stackroute.runtime.errors import InputError
from stackroute.runtime.prompt import PromptStyle
from stackroute.server.routing.abstention import AbstentionOptions
from stackroute.server.tools.calibration_records import Dataset
from stackroute.server.tools.evaluate import Query

CATALOG = {"name": "house", "description": "Household money.", "children": [
    {"name": "pay_water", "description": "Pay the water bill."},
    {"name": "weather", "description": "Weather forecast for a city."}]}


def dataset() -> Dataset:
    queries = [Query(id="a", query="pay the water bill", gold=("pay_water",), args=None,
                     tags=()),
               Query(id="b", query="weather forecast for Oslo", gold=("weather",), args=None,
                     tags=()),
               Query(id="c", query="tell me a joke", gold=(), args=None, tags=())]
    return Dataset("house", build_tree(CATALOG), queries, PromptStyle())


def test_every_right_first_leaf_and_out_of_scope_request_is_counted() -> None:
    stop_all = AbstentionOptions(threshold=1.0, is_judge_enabled=False)
    cost = judge_suite(dataset(), stop_all, WordEmbedder())
    assert (cost.in_scope, cost.first_leaf_right, cost.successes_stopped) == (2, 2, 2)
    assert (cost.out_of_scope, cost.out_of_scope_stopped) == (1, 1) and cost.cost == 1.0
    assert sorted(cost.stopped_examples) == ["pay the water bill", "weather forecast for Oslo"]
    call_all = AbstentionOptions(threshold=-1.0, is_judge_enabled=False)
    assert judge_suite(dataset(), call_all, WordEmbedder()).successes_stopped == 0


def test_a_check_that_asks_the_model_needs_one_and_asks_it_once_per_request() -> None:
    asking = AbstentionOptions(judge_weight=1.0, threshold=0.0, is_contrast_enabled=False)
    with pytest.raises(InputError, match=r"asks the model .* --model"):
        judge_suite(dataset(), asking, WordEmbedder())
    engine = LogitEngine({"yes": 2.0, "no": 0.0})  # says yes to everything: nothing stopped
    cost = judge_suite(dataset(), asking, WordEmbedder(), engine)
    assert (cost.first_leaf_right, cost.successes_stopped, cost.out_of_scope_stopped) == \
        (2, 0, 0)
    assert len(engine.calls) == 3
    says_no = LogitEngine({"yes": 0.0, "no": 2.0})
    stopped = judge_suite(dataset(), asking, WordEmbedder(), says_no)
    assert (stopped.successes_stopped, stopped.out_of_scope_stopped) == (2, 1)
