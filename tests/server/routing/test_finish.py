"""Finish when the work is done (routing/finish.py): the request's parts, the verdict from the
evidence, and a guided run that stops after its call although the model would go on."""

from __future__ import annotations

import doctest

import pytest
from doubles import LogitEngine
from recovery_kit import evidence_source, house_tree, run
from stackroute.server.routing import finish
from stackroute.server.routing.finish import FinishCheck, request_parts


@pytest.mark.parametrize(("task", "parts"), [
    ("Pay the water bill", ["Pay the water bill"]),
    ("Pay the water bill. Thanks!", ["Pay the water bill."]),
    ("Pay the water bill, then send a gift to Ana",
     ["Pay the water bill", "send a gift to Ana"]),
    ("Pay the water bill. Additionally, wire money abroad to Joe.",
     ["Pay the water bill.", "wire money abroad to Joe."]),
    ("Split the rent; and then pay the power bill now",
     ["Split the rent;", "pay the power bill now"]),
    ("Hi.", ["Hi."]),
])
def test_request_parts(task: str, parts: list[str]) -> None:
    assert request_parts(task) == parts


def test_docstring_examples() -> None:
    result = doctest.testmod(finish)
    assert result.attempted > 0 and result.failed == 0


def check(min_part_score: float = 0.3) -> FinishCheck:
    return FinishCheck(evidence_source(house_tree()), min_part_score=min_part_score)


def test_no_call_is_never_finished() -> None:
    assert not check().check("pay the water bill", ()).is_done


def test_one_ask_is_finished_by_any_call() -> None:
    verdict = check().check("pay the water bill", ("transfers/send_gift",))
    assert verdict.is_done and verdict.detail["asks"] == 1


def test_two_asks_wait_for_the_second_call() -> None:
    task = "Pay the water bill, then send a gift of money to a friend"
    first = check().check(task, ("billing/pay_water",))
    assert not first.is_done
    assert first.detail == {"asks": 2, "calls": 1, "missing": ["transfers/send_gift"]}
    assert check().check(task, ("billing/pay_water", "transfers/send_gift")).is_done


def test_parts_below_the_score_ask_for_nothing() -> None:
    task = "Pay the water bill. My cousin visited yesterday and we talked a lot."
    assert check().check(task, ("billing/pay_water",)).is_done


def test_a_guided_run_stops_after_its_call_though_the_model_would_go_on() -> None:
    # The model, asked after its call, would rather pay the power bill too.
    engine = LogitEngine({"billing": 5.0, "pay_water": 5.0, "pay_power": 4.0, "DONE": 0.0})
    state = run(house_tree(), engine, "pay the water bill", evidence_weight=0.0,
                is_backtracking_enabled=False, is_fallback_enabled=False)
    assert [c["path"] for c in state.calls] == ["billing/pay_water"]
    assert len(engine.routing_calls()) == 2  # root and billing: no call to unwind
    finishes = [e for e in state.trace if e.detail.get("finish")]
    assert [e.path for e in finishes] == ["billing", ""]


def test_without_finish_the_same_model_makes_a_second_call() -> None:
    engine = LogitEngine({"billing": 5.0, "pay_water": 5.0, "pay_power": 4.0, "DONE": 0.0})
    state = run(house_tree(), engine, "pay the water bill", evidence_weight=0.0,
                is_backtracking_enabled=False, is_fallback_enabled=False,
                is_finish_enabled=False)
    assert len(state.calls) >= 2


def test_the_next_call_serves_the_next_ask_in_the_requests_order() -> None:
    task = "Send a gift of money to a friend, then pay the water bill"
    asks = check()
    assert [leaf for _, leaf in asks.asks(task)] == ["transfers/send_gift", "billing/pay_water"]
    assert asks.current_part(task, ()) == "Send a gift of money to a friend"
    assert asks.current_part(task, ("transfers/send_gift",)) == "pay the water bill"
    assert asks.current_part(task, ("a", "b")) is None
    assert asks.current_part("pay the water bill", ()) is None  # one ask: the whole request


def test_a_guided_run_of_two_asks_calls_them_in_order() -> None:
    # Without the focus the whole request's evidence points at the water bill first.
    engine = LogitEngine({"DONE": -5.0, "BACK": -5.0})
    state = run(house_tree(), engine, "send a gift of money, then pay the water bill now "
                "pay water bill", is_contrast_enabled=False, finish_part_score=0.3)
    assert [c["path"] for c in state.calls] == ["transfers/send_gift", "billing/pay_water"]
