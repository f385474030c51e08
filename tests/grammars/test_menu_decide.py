"""CompiledMenu.decide with hand-made logits: greedy path, probabilities, bias, ties."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pytest
from numpy.typing import NDArray
from stackroute.grammars.menu import CompiledMenu, compile_menu
from stackroute.grammars.trie import ROOT
from tokenizers import Tokenizer

END = "<|im_end|>"
OPTIONS = ["pay", "payment", "payments_history", "pay_later", "DONE"]
# Branch points of this menu: ROOT (pay | payment | DONE), 0 = after "pay" ("_" | end),
# 4 = after "payment" ("s" | end). See test_menu_compile for the layout.
AFTER_PAY, AFTER_PAYMENT = 0, 4


@pytest.fixture
def menu(tiny_tokenizer: Tokenizer, tiny_end_id: int, tiny_vocab_size: int) -> CompiledMenu:
    assert tiny_vocab_size == VOCAB_SIZE
    return compile_menu(OPTIONS, tiny_tokenizer, end_token_id=tiny_end_id)


VOCAB_SIZE = 320  # the tiny tokenizer's padded logits width (conftest.TINY_VOCAB_SIZE)


class HandLogits:
    """logits_at for hand-written rows: {node: {token string: logit}}, everything else 0."""

    def __init__(self, tokenizer: Tokenizer, rows: Mapping[int, Mapping[str, float]]) -> None:
        self.rows = {}
        for node, by_token in rows.items():
            row = np.zeros(VOCAB_SIZE, dtype=np.float32)
            for token, value in by_token.items():
                row[tokenizer.token_to_id(token)] = value
            self.rows[node] = row
        self.calls: list[int] = []

    def __call__(self, node: int) -> NDArray[np.float32]:
        self.calls.append(node)
        return self.rows[node]


def log_softmax(*values: float) -> list[float]:
    total = math.log(sum(math.exp(v) for v in values))
    return [v - total for v in values]


def test_greedy_path_and_exact_option_logprobs(
    menu: CompiledMenu, tiny_tokenizer: Tokenizer
) -> None:
    logits = HandLogits(
        tiny_tokenizer,
        {
            ROOT: {"pay": 2.0, "payment": 1.0, "DONE": 0.0},
            AFTER_PAY: {END: 0.5, "_": 0.0},
            AFTER_PAYMENT: {END: -1.0, "s": 1.0},
        },
    )
    choice = menu.decide(logits)
    root_pay, root_payment, root_done = log_softmax(2.0, 1.0, 0.0)
    pay_underscore, pay_end = log_softmax(0.0, 0.5)  # children in token id order: "_" < end
    payment_s, payment_end = log_softmax(1.0, -1.0)
    assert choice.choice == "pay"
    assert choice.option_logprobs == pytest.approx(
        {
            "pay": root_pay + pay_end,
            "payment": root_payment + payment_end,
            "payments_history": root_payment + payment_s,
            "pay_later": root_pay + pay_underscore,
            "DONE": root_done,
        }
    )
    assert list(choice.option_logprobs) == OPTIONS  # menu order
    assert sum(math.exp(v) for v in choice.option_logprobs.values()) == pytest.approx(1.0)
    assert choice.probability == pytest.approx(math.exp(root_pay + pay_end))
    assert (choice.num_branch_points_on_path, choice.num_forced_tokens) == (2, 0)
    assert choice.margin == pytest.approx(min(root_pay - root_payment, pay_end - pay_underscore))
    assert logits.calls == [ROOT, AFTER_PAY, AFTER_PAYMENT]  # branch points only, in order


@pytest.mark.parametrize(
    ("rows", "expected", "num_branch_points", "num_forced"),
    [
        ({ROOT: {"pay": 1.0}, AFTER_PAY: {"_": 1.0}}, "pay_later", 2, 3),
        ({ROOT: {"payment": 1.0}, AFTER_PAYMENT: {"s": 1.0}}, "payments_history", 2, 7),
        ({ROOT: {"payment": 1.0}, AFTER_PAYMENT: {END: 1.0}}, "payment", 2, 0),
        ({ROOT: {"DONE": 1.0}}, "DONE", 1, 1),
    ],
)
def test_forced_tokens_after_the_last_branch_point(
    menu: CompiledMenu,
    tiny_tokenizer: Tokenizer,
    rows: dict[int, dict[str, float]],
    expected: str,
    num_branch_points: int,
    num_forced: int,
) -> None:
    full = {ROOT: {}, AFTER_PAY: {}, AFTER_PAYMENT: {}} | rows
    choice = menu.decide(HandLogits(tiny_tokenizer, full))
    assert choice.choice == expected
    assert (choice.num_branch_points_on_path, choice.num_forced_tokens) == (
        num_branch_points,
        num_forced,
    )
    assert num_branch_points + num_forced == len(menu.sequence(expected))


def test_ties_go_to_the_lowest_token_id(menu: CompiledMenu, tiny_tokenizer: Tokenizer) -> None:
    # All zero: at the root "pay" (257) beats "payment" and "DONE"; after "pay", "_" (62)
    # beats the end token (284).
    choice = menu.decide(HandLogits(tiny_tokenizer, {ROOT: {}, AFTER_PAY: {}, AFTER_PAYMENT: {}}))
    assert choice.choice == "pay_later"
    assert choice.margin == 0.0


def test_only_menu_tokens_count(menu: CompiledMenu, tiny_tokenizer: Tokenizer) -> None:
    # A huge logit on a token outside the menu changes nothing: it is masked, not renormalised in.
    plain = {ROOT: {"pay": 1.0}, AFTER_PAY: {END: 1.0}, AFTER_PAYMENT: {}}
    noisy = {ROOT: {"pay": 1.0, "x": 50.0}, AFTER_PAY: {END: 1.0, "q": 80.0}, AFTER_PAYMENT: {}}
    a = menu.decide(HandLogits(tiny_tokenizer, plain))
    b = menu.decide(HandLogits(tiny_tokenizer, noisy))
    assert a.choice == b.choice == "pay"
    assert a.option_logprobs == pytest.approx(b.option_logprobs)


def test_bias_moves_the_choice(menu: CompiledMenu, tiny_tokenizer: Tokenizer) -> None:
    rows = {
        ROOT: {"pay": 1.0, "payment": 0.5, "DONE": 0.8},
        AFTER_PAY: {END: 1.0},
        AFTER_PAYMENT: {END: 1.0},
    }
    assert menu.decide(HandLogits(tiny_tokenizer, rows)).choice == "pay"
    biased = menu.decide(HandLogits(tiny_tokenizer, rows), option_bias={"payment": 1.0})
    assert biased.choice == "payment"
    assert sum(math.exp(v) for v in biased.option_logprobs.values()) == pytest.approx(1.0)


def test_bias_tilts_the_distribution_exactly(
    menu: CompiledMenu, tiny_tokenizer: Tokenizer
) -> None:
    rows = {
        ROOT: {"pay": 0.3, "payment": -0.2, "DONE": 0.1},
        AFTER_PAY: {END: 0.4, "_": -0.3},
        AFTER_PAYMENT: {END: 0.2, "s": 0.6},
    }
    bias = {"pay_later": 2.0, "DONE": -1.0, "payment": 0.5}
    plain = menu.decide(HandLogits(tiny_tokenizer, rows)).option_logprobs
    tilted = menu.decide(HandLogits(tiny_tokenizer, rows), option_bias=bias).option_logprobs
    # p'(o) = p(o) exp(bias(o)) / Z, like logit_bias on a token, lifted to options.
    unnormalised = {o: plain[o] + bias.get(o, 0.0) for o in OPTIONS}
    log_z = math.log(sum(math.exp(v) for v in unnormalised.values()))
    assert tilted == pytest.approx({o: v - log_z for o, v in unnormalised.items()})


def test_equal_biases_change_nothing(menu: CompiledMenu, tiny_tokenizer: Tokenizer) -> None:
    rows = {ROOT: {"pay": 0.3, "DONE": 0.2}, AFTER_PAY: {"_": 0.1}, AFTER_PAYMENT: {"s": 0.4}}
    plain = menu.decide(HandLogits(tiny_tokenizer, rows))
    zeros = menu.decide(HandLogits(tiny_tokenizer, rows), option_bias={"DONE": 0.0})
    shifted = menu.decide(HandLogits(tiny_tokenizer, rows), option_bias=dict.fromkeys(OPTIONS, 3.0))
    for other in (zeros, shifted):
        assert other.choice == plain.choice
        assert other.option_logprobs == pytest.approx(plain.option_logprobs)


def test_bias_where_each_child_holds_one_option(
    tiny_tokenizer: Tokenizer, tiny_end_id: int
) -> None:
    # One option per root child: the offset is bias(c) - logsumexp(bias), so the choice is
    # argmax of logit + bias.
    menu = compile_menu(["pay", "DONE", "BACK"], tiny_tokenizer, end_token_id=tiny_end_id)
    rows = {ROOT: {"pay": 1.0, "DONE": 0.0, "BACK": 0.2}}
    choice = menu.decide(HandLogits(tiny_tokenizer, rows), option_bias={"DONE": 1.5})
    assert choice.choice == "DONE"
    expected = log_softmax(1.0, 1.5, 0.2)
    assert list(choice.option_logprobs.values()) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("bias", "message"),
    [
        ({"nope": 1.0}, r"not on the menu: \['nope'\]"),
        ({"pay": float("inf")}, "must be finite"),
        ({"pay": float("nan")}, "must be finite"),
    ],
)
def test_rejects_bad_bias(
    menu: CompiledMenu, tiny_tokenizer: Tokenizer, bias: dict[str, float], message: str
) -> None:
    rows = {ROOT: {}, AFTER_PAY: {}, AFTER_PAYMENT: {}}
    with pytest.raises(ValueError, match=message):
        menu.decide(HandLogits(tiny_tokenizer, rows), option_bias=bias)


def test_rejects_rows_that_do_not_cover_the_menu(menu: CompiledMenu) -> None:
    with pytest.raises(ValueError, match="expected one row covering token id"):
        menu.decide(lambda node: np.zeros(10, dtype=np.float32))


def test_rejects_rows_with_no_finite_menu_logit(menu: CompiledMenu) -> None:
    row = np.full(VOCAB_SIZE, -np.inf, dtype=np.float32)
    with pytest.raises(ValueError, match="no usable score"):
        menu.decide(lambda node: row)


def test_minus_infinity_on_some_children_is_a_mask(
    menu: CompiledMenu, tiny_tokenizer: Tokenizer
) -> None:
    logits = HandLogits(tiny_tokenizer, {ROOT: {"pay": -np.inf}, AFTER_PAY: {}, AFTER_PAYMENT: {}})
    choice = menu.decide(logits)
    # "payment" (261) and "DONE" (264) tie at 0, then "s" (82) and the end token (284) do.
    assert choice.choice == "payments_history"
    assert choice.option_logprobs["pay"] == -np.inf
    assert choice.option_logprobs["pay_later"] == -np.inf
