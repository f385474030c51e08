"""Fitting the abstention check (server/routing/abstention.py) on dev data.

Each sample is one dev request's first leaf as the router was about to call it, with the
check's features and what the right answer was:
- `CALL`: an in-scope request whose leaf was its gold leaf (abstaining would lose a success);
- `ABSTAIN`: an out-of-scope request (any call is a tool hallucination);
- `EITHER`: an in-scope request routed to a wrong leaf (a failure either way: not fitted).
A logistic regression (standardised features, L2, every weight kept at or above zero: a
more confident yes, a higher evidence score or a clearer evidence lead never argues for
abstaining, which a few dev items could otherwise teach it) separates CALL from ABSTAIN;
the threshold is then the highest one that abstains on at most `max_call_loss` of the
in-scope requests' successes (0: none), placed halfway to the next ABSTAIN sample below it,
so the margin is not spent on the dev items themselves.

>>> from stackroute.server.routing.abstention import AbstentionFeatures as F
>>> samples = [Sample(F(judge=j, contrast=0.0, score=s, margin=0.1), label)
...            for j, s, label in [(3, .6, Label.CALL), (2, .5, Label.CALL),
...                                (-2, .3, Label.ABSTAIN), (-3, .2, Label.ABSTAIN)]]
>>> fitted = fit_abstention(samples)
>>> [fitted.options.abstains(s.features) for s in samples]
[False, False, True, True]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any

import numpy as np
from stackroute.runtime.errors import InputError
from stackroute.server.routing.abstention import AbstentionFeatures, AbstentionOptions

FEATURES = tuple(f.name for f in fields(AbstentionFeatures))
L2 = 0.1
STEPS = 4000
LEARNING_RATE = 0.2
EMPTY_GAP = 0.5  # below the lowest kept success when no out-of-scope sample is under it


class Label(StrEnum):
    CALL = "call"
    ABSTAIN = "abstain"
    EITHER = "either"


@dataclass(frozen=True)
class Sample:
    features: AbstentionFeatures
    label: Label


@dataclass(frozen=True)
class Fitted:
    options: AbstentionOptions
    measured: dict[str, Any]


def _matrix(samples: Sequence[Sample]) -> np.ndarray:
    return np.array([[getattr(s.features, name) for name in FEATURES] for s in samples],
                    dtype=np.float64)


def logistic(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    """Weights (each >= 0) and bias of P(y=1 | x), in `x`'s own units (fitted on
    standardised columns)."""
    mean, std = x.mean(axis=0), x.std(axis=0)
    std[std < 1e-9] = 1.0
    z = (x - mean) / std
    w = np.zeros(z.shape[1])
    b = 0.0
    # Balanced classes: each class weighs half, however many samples it has.
    pos = max(int(y.sum()), 1)
    neg = max(len(y) - int(y.sum()), 1)
    weight = np.where(y == 1, 0.5 / pos, 0.5 / neg)
    for _ in range(STEPS):
        p = 1.0 / (1.0 + np.exp(-(z @ w + b)))
        g = weight * (p - y)
        w -= LEARNING_RATE * (z.T @ g + L2 * w / len(y))
        np.maximum(w, 0.0, out=w)  # monotone: see the module docstring
        b -= LEARNING_RATE * float(g.sum())
    raw = w / std
    return raw, float(b - (raw * mean).sum())


def fit_abstention(samples: Sequence[Sample], *, max_call_loss: float = 0.0,
                   num_in_scope: int | None = None,
                   is_contrast_enabled: bool = True) -> Fitted:
    """The check fitted on `samples`. `num_in_scope`: the in-scope requests the loss is a
    fraction of (default: the CALL and EITHER samples; requests the router answered with no
    call have no sample)."""
    fitted = [s for s in samples if s.label is not Label.EITHER]
    calls = [s for s in fitted if s.label is Label.CALL]
    stops = [s for s in fitted if s.label is Label.ABSTAIN]
    if not calls or not stops:
        raise InputError(f"fitting the abstention check needs samples of both kinds; got "
                         f"{len(calls)} in-scope successes and {len(stops)} out-of-scope")
    x = _matrix(fitted)
    y = np.array([1.0 if s.label is Label.CALL else 0.0 for s in fitted])
    w, b = logistic(x, y)
    weights = dict(zip(FEATURES, (round(float(v), 6) for v in w), strict=True))
    options = AbstentionOptions(judge_weight=weights["judge"],
                                contrast_weight=weights["contrast"],
                                score_weight=weights["score"], margin_weight=weights["margin"],
                                bias=round(b, 6), threshold=0.0,
                                is_contrast_enabled=is_contrast_enabled)
    kept = sorted(options.fit(s.features) for s in calls)
    stopped = sorted(options.fit(s.features) for s in stops)
    total = num_in_scope if num_in_scope is not None else \
        sum(s.label is not Label.ABSTAIN for s in samples)
    allowed = int(max_call_loss * total + 1e-9)
    lowest_kept = kept[min(allowed, len(kept) - 1)]
    below = [v for v in stopped if v < lowest_kept]
    threshold = (lowest_kept + below[-1]) / 2 if below else lowest_kept - EMPTY_GAP
    options = AbstentionOptions(**{**options.to_dict(), "threshold": round(threshold, 6)})
    measured = {
        "features": list(FEATURES),
        "num_call": len(calls), "num_abstain": len(stops),
        "num_either": sum(s.label is Label.EITHER for s in samples),
        "max_call_loss": max_call_loss,
        "dev_out_of_scope_stopped": sum(options.abstains(s.features) for s in stops)
        / len(stops),
        "dev_successes_stopped": sum(options.abstains(s.features) for s in calls),
    }
    return Fitted(options, measured)
