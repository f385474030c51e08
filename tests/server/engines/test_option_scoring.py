"""Option probabilities from constrained answers' token logprobs: tables of inputs and exact
expected outputs, no model (the token steps are the ones measured from vLLM on CPU)."""

from __future__ import annotations

import doctest
import math

import pytest
from stackroute.server.engines import option_scoring
from stackroute.server.engines.option_scoring import (
    InvalidMenuError,
    OptionBiasError,
    TokenStep,
    check_menu,
    decide_from_answer,
    estimate_options,
    margin_of,
    max_answer_tokens,
    tilt,
)

E = math.exp
SHARED = ("search_web", "search_file", "search_email")


def test_doctests() -> None:
    assert doctest.testmod(option_scoring).failed == 0


def test_whole_options_as_single_entries_are_read_exactly() -> None:
    # stackroute serve: one entry, the answer; every alternative a whole option
    steps = [TokenStep(b"pay", math.log(0.5), ((b"pay", math.log(0.5)),
                                               (b"payment", math.log(0.3)),
                                               (b"payments_history", math.log(0.2))))]
    est = estimate_options(["pay", "payment", "payments_history"], "pay", steps)
    assert est.is_exact
    assert est.probabilities == pytest.approx({"pay": 0.5, "payment": 0.3,
                                               "payments_history": 0.2})


def test_a_shared_first_token_is_split_and_marked_inexact() -> None:
    # measured: search -0.494, s -0.994, se -3.99; "_" forced; file -0.455, web -1.08, email -4.33
    steps = [TokenStep(b"search", -0.494, ((b"search", -0.494), (b"s", -0.994), (b"se", -3.99))),
             TokenStep(b"_", 0.0, ((b"_", 0.0),)),
             TokenStep(b"file", -0.455, ((b"file", -0.455), (b"web", -1.08),
                                         (b"email", -4.33))),
             TokenStep(b"<|im_end|>", 0.0, ((b"<|im_end|>", 0.0),))]
    est = estimate_options(SHARED, "search_file", steps)
    assert not est.is_exact
    shared = (E(-0.994) + E(-3.99)) / 3
    total = E(-0.494 - 0.455) + E(-0.494 - 1.08) + E(-0.494 - 4.33) + 3 * shared
    assert est.probabilities["search_file"] == pytest.approx((E(-0.949) + shared) / total)
    assert est.probabilities["search_web"] == pytest.approx((E(-1.574) + shared) / total)
    assert est.resolved_mass == pytest.approx(E(-0.949) + E(-1.574) + E(-4.824))


def test_non_canonical_branches_add_up_and_the_end_token_ends_an_option() -> None:
    # "B|ACK" chosen; "D" and "DO" lead to DONE, "pay" could still become payment(s_history)
    options = ("pay", "payment", "BACK", "DONE")
    steps = [TokenStep(b"B", math.log(0.5), ((b"B", math.log(0.5)), (b"D", math.log(0.3)),
                                             (b"DO", math.log(0.1)), (b"pay", math.log(0.1)))),
             TokenStep(b"ACK", 0.0, ((b"ACK", 0.0),)),
             TokenStep(b"", 0.0, ((b"", 0.0),))]
    est = estimate_options(options, "BACK", steps)
    assert est.probabilities["DONE"] == pytest.approx(0.4)
    assert est.probabilities["BACK"] == pytest.approx(0.5)
    assert est.probabilities["pay"] == pytest.approx(0.05)  # "pay" shared with "payment"
    assert not est.is_exact


def test_an_unreported_end_step_leaves_a_prefix_option_shared() -> None:
    steps = [TokenStep(b"pay", 0.0, ((b"pay", 0.0),))]
    est = estimate_options(["pay", "payment", "x"], "pay", [*steps, TokenStep(b"x", 0.0)])
    assert est.probabilities["pay"] == pytest.approx(1.0)
    est = estimate_options(["pay", "payment", "x"], "pay",
                           [TokenStep(b"pa", 0.0, ((b"pa", 0.0),)),
                            TokenStep(b"y", 0.0, ((b"y", 0.0),))])
    assert est.probabilities["pay"] == pytest.approx(0.5)  # "pay" or "payment": unknown
    assert not est.is_exact


def test_unseen_mass_goes_to_unseen_options() -> None:
    steps = [TokenStep(b"a", math.log(0.6), ((b"a", math.log(0.6)), (b"b", math.log(0.2))))]
    est = estimate_options(["a", "b", "c", "d"], "a", steps)
    assert est.probabilities == pytest.approx({"a": 0.6, "b": 0.2, "c": 0.1, "d": 0.1})
    assert not est.is_exact and est.resolved_mass == pytest.approx(0.8)


def test_bias_tilts_an_exact_distribution_and_refuses_an_estimate() -> None:
    exact = [TokenStep(b"a", math.log(0.75), ((b"a", math.log(0.75)), (b"b", math.log(0.25))))]
    decided = decide_from_answer(["a", "b"], "a", exact, option_bias={"b": math.log(9)})
    assert decided.choice == "b"
    assert decided.probabilities == pytest.approx({"a": 0.25, "b": 0.75})
    assert decided.margin == pytest.approx(math.log(3))
    partial = [TokenStep(b"a", math.log(0.5), ((b"a", math.log(0.5)),))]
    with pytest.raises(OptionBiasError, match="exact"):
        decide_from_answer(["a", "b"], "a", partial, option_bias={"b": 1.0})
    assert decide_from_answer(["a", "b"], "a", partial, option_bias={"b": 0.0}).choice == "a"


@pytest.mark.parametrize(("options", "problem"), [
    ([], "at least one"), (["a", "a"], "unique"), (["a", ""], "empty"), ([" a"], "whitespace"),
    ("ab", "not the string")])
def test_bad_menus_are_refused(options: list[str], problem: str) -> None:
    with pytest.raises(InvalidMenuError, match=problem):
        check_menu(options)


def test_small_helpers() -> None:
    assert tilt({"a": 0.5, "b": 0.5}, {}) == {"a": 0.5, "b": 0.5}
    with pytest.raises(ValueError, match="not on the menu"):
        tilt({"a": 1.0}, {"z": 1.0})
    assert margin_of({"a": 1.0}, "a") == math.inf
    assert margin_of({"a": 0.2, "b": 0.8}, "a") == pytest.approx(math.log(0.25))
    assert max_answer_tokens(["ab", "数据"]) == 7  # 6 UTF-8 bytes, then the end token
