"""greedy_decode against a hand-made constraint: steps vs forced tokens, ties, limits, errors."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from numpy.typing import NDArray
from stackroute.grammars.decode import FinishReason, greedy_decode

VOCAB = 8
STOP = 7


class SequencesConstraint:
    """Allows exactly the given token sequences (each ending in STOP); no jump-forward."""

    def __init__(self, sequences: list[tuple[int, ...]], *, jump: tuple[int, ...] = ()) -> None:
        self.sequences = sequences
        self.accepted: list[int] = []
        self.jump = jump

    @property
    def is_finished(self) -> bool:
        return bool(self.accepted) and self.accepted[-1] == STOP

    def allowed_mask(self) -> NDArray[np.bool_]:
        mask = np.zeros(VOCAB, dtype=np.bool_)
        n = len(self.accepted)
        for sequence in self.sequences:
            if not self.is_finished and list(sequence[:n]) == self.accepted and len(sequence) > n:
                mask[sequence[n]] = True
        return mask

    def accept(self, token_id: int) -> bool:
        if not self.allowed_mask()[token_id]:
            return False
        self.accepted.append(token_id)
        return True

    def jump_forward_tokens(self) -> tuple[int, ...]:
        return self.jump if not self.accepted else ()

    def text_of(self, token_ids: Sequence[int]) -> str:
        return "".join(str(t) for t in token_ids if t != STOP)


def model(rows: dict[tuple[int, ...], list[float]]):  # type: ignore[no-untyped-def]
    calls: list[tuple[int, ...]] = []

    def next_logits(generated: Sequence[int]) -> NDArray[np.float32]:
        calls.append(tuple(generated))
        return np.array(rows.get(tuple(generated), [0.0] * VOCAB), dtype=np.float32)

    return next_logits, calls


def test_model_is_asked_only_where_there_is_a_choice() -> None:
    constraint = SequencesConstraint([(1, 2, 3, STOP), (1, 2, 4, STOP)])
    next_logits, calls = model({(1, 2): [0, 0, 0, 0.5, 1.0, 0, 0, 0]})
    result = greedy_decode(next_logits, constraint, max_tokens=10)
    assert result.token_ids == (1, 2, 4, STOP)
    assert result.text == "124"
    assert result.finish_reason is FinishReason.STOP
    assert (result.num_model_steps, result.num_forced_tokens) == (1, 3)
    assert calls == [(1, 2)]


def test_ties_go_to_the_lowest_allowed_token() -> None:
    constraint = SequencesConstraint([(5, STOP), (3, STOP), (6, STOP)])
    next_logits, _ = model({})
    assert greedy_decode(next_logits, constraint, max_tokens=5).token_ids == (3, STOP)


def test_disallowed_tokens_never_win() -> None:
    constraint = SequencesConstraint([(5, STOP), (3, STOP)])
    next_logits, _ = model({(): [9, 9, 9, -np.inf, 9, -np.inf, 9, 9]})
    # Every allowed token is -inf: still an allowed token, the lowest.
    assert greedy_decode(next_logits, constraint, max_tokens=5).token_ids == (3, STOP)


def test_jump_forward_tokens_are_forced() -> None:
    constraint = SequencesConstraint([(1, 2, 3, STOP), (1, 2, 4, STOP)], jump=(1, 2))
    next_logits, calls = model({(1, 2): [0, 0, 0, 1.0, 0, 0, 0, 0]})
    result = greedy_decode(next_logits, constraint, max_tokens=10)
    assert result.token_ids == (1, 2, 3, STOP)
    assert (result.num_model_steps, result.num_forced_tokens) == (1, 3)
    assert calls == [(1, 2)]


def test_length_limit_stops_early() -> None:
    constraint = SequencesConstraint([(1, 2, 3, STOP)], jump=(1, 2, 3))
    next_logits, _ = model({})
    result = greedy_decode(next_logits, constraint, max_tokens=2)
    assert result.token_ids == (1, 2)
    assert result.finish_reason is FinishReason.LENGTH
    empty = greedy_decode(next_logits, SequencesConstraint([(1, STOP)]), max_tokens=0)
    assert empty.token_ids == ()


@pytest.mark.parametrize(
    ("row", "message"),
    [([0.0] * (VOCAB + 1), "expected \\(8,\\)"), ([np.nan] * VOCAB, "NaN")],
)
def test_bad_logits_raise(row: list[float], message: str) -> None:
    constraint = SequencesConstraint([(5, STOP), (3, STOP)])
    with pytest.raises(ValueError, match=message):
        greedy_decode(lambda generated: np.array(row), constraint, max_tokens=5)
