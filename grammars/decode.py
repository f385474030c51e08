"""Greedy decoding under a token constraint: the reference loop the grammar tests drive.

One step is: take the tokens the grammar forces (jump-forward), else ask the model and take
the best allowed token. The model is any `next_logits(generated_token_ids) -> logits` callable
(a fake model in tests/grammars). No engine runs this loop: the transformers engine has its
own (`server/engines/decoding.py`: batched forced tokens, prompt-lookup drafts) and vLLM its
structured outputs; this one states what a constraint must do, step by step, and the tests
check the compiled constraints against it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

NextLogits = Callable[[Sequence[int]], NDArray[np.floating]]
"""`next_logits(generated)`: logits `[vocab]` for the token after the prompt (which the
callable holds) and `generated`, the tokens this loop produced so far."""


class TokenConstraint(Protocol):
    """What the loop needs from a matcher (`schema.ConstraintMatcher` is one)."""

    @property
    def is_finished(self) -> bool: ...

    def allowed_mask(self) -> NDArray[np.bool_]: ...

    def accept(self, token_id: int) -> bool: ...

    def jump_forward_tokens(self) -> tuple[int, ...]: ...

    def text_of(self, token_ids: Sequence[int]) -> str: ...


class FinishReason(StrEnum):
    STOP = "stop"  # the constraint finished: its stop token was accepted
    LENGTH = "length"  # max_tokens ran out first


@dataclass(frozen=True, slots=True)
class DecodeResult:
    """`token_ids` includes the stop token when there is one; `text` leaves it out.
    `num_model_steps + num_forced_tokens == len(token_ids)`."""

    token_ids: tuple[int, ...]
    text: str
    finish_reason: FinishReason
    num_model_steps: int
    num_forced_tokens: int


def greedy_decode(
    next_logits: NextLogits,
    constraint: TokenConstraint,
    *,
    max_tokens: int,
    is_jump_forward: bool = True,
) -> DecodeResult:
    """Generate greedily under `constraint` until it finishes or `max_tokens` are produced.

    A token is forced (no model call) when the grammar's jump-forward gives it or when the
    mask allows exactly one token. Ties in the logits go to the lowest token id.
    """
    if max_tokens < 0:
        raise ValueError(f"max_tokens must be >= 0; got {max_tokens}")
    generated: list[int] = []
    num_model_steps = 0
    num_forced = 0
    while not constraint.is_finished and len(generated) < max_tokens:
        if is_jump_forward:
            forced = constraint.jump_forward_tokens()[: max_tokens - len(generated)]
            num_forced += _accept_all(constraint, forced, generated)
            if forced:
                continue
        mask = constraint.allowed_mask()
        allowed = np.flatnonzero(mask)
        if allowed.size == 0:
            raise RuntimeError("constraint allows no token but is not finished")  # our bug
        if allowed.size == 1:
            num_forced += _accept_all(constraint, (int(allowed[0]),), generated)
            continue
        token = _best_allowed(next_logits(tuple(generated)), allowed, mask.shape[0])
        num_model_steps += 1
        _accept_all(constraint, (token,), generated)
    finish = FinishReason.STOP if constraint.is_finished else FinishReason.LENGTH
    return DecodeResult(
        token_ids=tuple(generated),
        text=constraint.text_of(generated),
        finish_reason=finish,
        num_model_steps=num_model_steps,
        num_forced_tokens=num_forced,
    )


def _best_allowed(logits: NDArray[np.floating], allowed: NDArray[np.intp], vocab_size: int) -> int:
    row = np.asarray(logits)
    if row.ndim != 1 or row.shape[0] != vocab_size:
        raise ValueError(f"logits have shape {row.shape}; expected ({vocab_size},)")
    scores = row[allowed]
    if np.isnan(scores).any():
        raise ValueError("logits are NaN at an allowed token")
    return int(allowed[int(np.argmax(scores))])  # first maximum = lowest token id


def _accept_all(constraint: TokenConstraint, tokens: Sequence[int], generated: list[int]) -> int:
    for token in tokens:
        if not constraint.accept(token):
            raise RuntimeError(f"constraint rejected token {token} it offered")  # our bug
        generated.append(token)
    return len(tokens)
