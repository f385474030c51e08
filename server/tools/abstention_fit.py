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

Which features the check uses is chosen on the same dev samples (`choose_features`): every
non-empty subset is fitted and scored by leave-one-out (each sample judged by the check fitted
on the others), and the subset that stops the most out-of-scope samples net of the successes
it stops wins, ties going to the one that asks the model less, then to fewer features. A
feature left out has weight 0, and a check with no weight on the model's answers does not ask
them (no model call).

>>> from stackroute.server.routing.abstention import AbstentionFeatures as F
>>> samples = [Sample(F(judge=j, contrast=0.0, score=s, margin=0.1, values=0.0, lead=s,
...                      named=1.0), label)
...            for j, s, label in [(3, .6, Label.CALL), (2, .5, Label.CALL),
...                                (-2, .3, Label.ABSTAIN), (-3, .2, Label.ABSTAIN)]]
>>> fitted = fit_abstention(samples)
>>> [fitted.options.abstains(s.features) for s in samples]
[False, False, True, True]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from enum import StrEnum
from itertools import combinations
from typing import Any

import numpy as np
from stackroute.runtime.errors import InputError
from stackroute.server.routing.abstention import AbstentionFeatures, AbstentionOptions

FEATURES = tuple(f.name for f in fields(AbstentionFeatures))
L2 = 0.1
STEPS = 4000
LEARNING_RATE = 0.2
EMPTY_GAP = 0.5  # below the lowest kept success when no out-of-scope sample is under it
MODEL_FEATURES = ("judge", "contrast")  # the features that cost a model call
MAX_BATCH_CELLS = 4_000_000  # leave-one-out folds x samples x features descended at once


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
    w, b = logistic_folds(x, y, np.ones((1, len(y)), dtype=bool))
    return w[0], float(b[0])


def logistic_folds(x: np.ndarray, y: np.ndarray,
                   keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`logistic` fitted once per row of `keep` (`[folds, samples]`: the samples that fold
    sees), all folds in one descent: weights `[folds, features]` and biases `[folds]`. A fold
    is the same fit as `logistic` on its samples alone (its own standardisation and class
    balance); batching them is what makes leave-one-out over every feature subset cheap."""
    seen = keep.astype(np.float64)  # [F, n]
    count = seen.sum(axis=1)  # [F]
    mean = seen @ x / count[:, None]  # [F, d]
    diff = x[None, :, :] - mean[:, None, :]  # [F, n, d]
    std = np.sqrt((seen[:, :, None] * diff ** 2).sum(axis=1) / count[:, None])
    std[std < 1e-9] = 1.0
    z = diff / std[:, None, :]
    # Balanced classes: each class weighs half, however many samples it has.
    pos = np.maximum((seen * y).sum(axis=1), 1.0)
    neg = np.maximum(count - (seen * y).sum(axis=1), 1.0)
    weight = seen * np.where(y == 1, 0.5 / pos[:, None], 0.5 / neg[:, None])
    w = np.zeros(mean.shape)
    b = np.zeros(len(count))
    for _ in range(STEPS):
        p = 1.0 / (1.0 + np.exp(-(np.einsum("fnd,fd->fn", z, w) + b[:, None])))
        g = weight * (p - y)
        w -= LEARNING_RATE * (np.einsum("fnd,fn->fd", z, g) + L2 * w / count[:, None])
        np.maximum(w, 0.0, out=w)  # monotone: see the module docstring
        b -= LEARNING_RATE * g.sum(axis=1)
    raw = w / std
    return raw, b - (raw * mean).sum(axis=1)


def fit_abstention(samples: Sequence[Sample], *, max_call_loss: float = 0.0,
                   num_in_scope: int | None = None,
                   features: Sequence[str] = FEATURES) -> Fitted:
    """The check fitted on `samples`, on `features` only (the others weigh 0).
    `num_in_scope`: the in-scope requests the loss is a fraction of (default: the CALL and
    EITHER samples; requests the router answered with no call have no sample)."""
    _check_features(features)
    fitted = [s for s in samples if s.label is not Label.EITHER]
    calls = [s for s in fitted if s.label is Label.CALL]
    stops = [s for s in fitted if s.label is Label.ABSTAIN]
    if not calls or not stops:
        raise InputError(f"fitting the abstention check needs samples of both kinds; got "
                         f"{len(calls)} in-scope successes and {len(stops)} out-of-scope")
    x, y = _columns(fitted, features)
    w, b = logistic(x, y)
    options = _thresholded(_weighed(features, w, b), calls, stops, allowed=_allowed(
        max_call_loss, num_in_scope, sum(s.label is not Label.ABSTAIN for s in samples)))
    measured = {
        "features": list(features),
        "num_call": len(calls), "num_abstain": len(stops),
        "num_either": sum(s.label is Label.EITHER for s in samples),
        "max_call_loss": max_call_loss,
        "dev_out_of_scope_stopped": sum(options.abstains(s.features) for s in stops)
        / len(stops),
        "dev_successes_stopped": sum(options.abstains(s.features) for s in calls),
    }
    return Fitted(options, measured)


def _check_features(features: Sequence[str]) -> None:
    unknown = sorted(set(features) - set(FEATURES))
    if unknown or not features:
        raise InputError(f"abstention features must be some of {list(FEATURES)}; got "
                         f"{list(features)}")


def _columns(samples: Sequence[Sample], features: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    columns = [FEATURES.index(f) for f in features]
    x = _matrix(samples)[:, columns]
    y = np.array([1.0 if s.label is Label.CALL else 0.0 for s in samples])
    return x, y


def _weighed(features: Sequence[str], w: np.ndarray, b: float) -> AbstentionOptions:
    """The check with `features` weighed by `w` (the others 0), its threshold not set yet."""
    weights = dict.fromkeys(FEATURES, 0.0) | {
        f: round(float(v), 6) for f, v in zip(features, w, strict=True)}
    return AbstentionOptions(
        **{f"{f}_weight": weights[f] for f in FEATURES}, bias=round(float(b), 6),
        threshold=0.0, is_judge_enabled=bool(weights["judge"] or weights["contrast"]),
        is_contrast_enabled=bool(weights["contrast"]))


def _allowed(max_call_loss: float, num_in_scope: int | None, num_in_scope_samples: int) -> int:
    """How many in-scope successes a threshold may stop: `max_call_loss` of the in-scope
    requests (`num_in_scope`; None: the in-scope samples, requests answered with no call have
    none)."""
    total = num_in_scope if num_in_scope is not None else num_in_scope_samples
    return int(max_call_loss * total + 1e-9)


def _thresholded(options: AbstentionOptions, calls: Sequence[Sample],
                 stops: Sequence[Sample], *, allowed: int) -> AbstentionOptions:
    """`options` with the highest threshold that stops at most `allowed` of `calls`, placed
    halfway to the next of `stops` below it."""
    kept = sorted(options.fit(s.features) for s in calls)
    stopped = sorted(options.fit(s.features) for s in stops)
    lowest_kept = kept[min(allowed, len(kept) - 1)]
    below = [v for v in stopped if v < lowest_kept]
    threshold = (lowest_kept + below[-1]) / 2 if below else lowest_kept - EMPTY_GAP
    return replace(options, threshold=round(threshold, 6))


@dataclass(frozen=True)
class CrossValidated:
    """A feature subset's leave-one-out result on the dev samples."""

    features: tuple[str, ...]
    out_of_scope_stopped: int
    successes_stopped: int

    @property
    def net(self) -> int:
        return self.out_of_scope_stopped - self.successes_stopped

    @property
    def asks_model(self) -> int:
        return len(set(self.features) & set(MODEL_FEATURES))


def cross_validate(samples: Sequence[Sample], features: Sequence[str], *,
                   max_call_loss: float = 0.0, num_in_scope: int | None = None,
                   ) -> CrossValidated:
    """Each CALL and ABSTAIN sample judged by the check fitted on the others (where the
    others hold no sample of its kind there is no check, and the sample is called). Every
    held-out fit is `fit_abstention` on the others, the fits descended together."""
    _check_features(features)
    fitted = [s for s in samples if s.label is not Label.EITHER]
    if len({s.label for s in fitted}) < 2:
        raise InputError("cross-validating the abstention check needs in-scope successes "
                         "and out-of-scope samples")
    held_out = [i for i, s in enumerate(fitted)
                if sum(o.label is s.label for o in fitted) > 1]
    if not held_out:
        return CrossValidated(tuple(features), 0, 0)
    x, y = _columns(fitted, features)
    keep = np.ones((len(held_out), len(fitted)), dtype=bool)
    keep[np.arange(len(held_out)), held_out] = False
    chunk = max(1, MAX_BATCH_CELLS // x.size)  # folds a batch holds: memory stays bounded
    fits = [logistic_folds(x, y, keep[start:start + chunk])
            for start in range(0, len(held_out), chunk)]
    w = np.concatenate([f[0] for f in fits])
    b = np.concatenate([f[1] for f in fits])
    num_either = len(samples) - len(fitted)
    oos = calls = 0
    for fold, i in enumerate(held_out):
        rest = [s for j, s in enumerate(fitted) if j != i]
        options = _thresholded(
            _weighed(features, w[fold], float(b[fold])),
            [s for s in rest if s.label is Label.CALL],
            [s for s in rest if s.label is Label.ABSTAIN],
            allowed=_allowed(max_call_loss, num_in_scope,
                             num_either + sum(s.label is Label.CALL for s in rest)))
        if options.abstains(fitted[i].features):
            oos += fitted[i].label is Label.ABSTAIN
            calls += fitted[i].label is Label.CALL
    return CrossValidated(tuple(features), oos, calls)


def choose_features(samples: Sequence[Sample], *, max_call_loss: float = 0.0,
                    num_in_scope: int | None = None,
                    candidates: Sequence[Sequence[str]] | None = None,
                    ) -> tuple[tuple[str, ...], list[CrossValidated]]:
    """The feature subset leave-one-out on `samples` likes best (see the module docstring),
    and every subset's result, best first."""
    results = sorted((cross_validate(samples, c, max_call_loss=max_call_loss,
                                     num_in_scope=num_in_scope)
                      for c in (candidates if candidates is not None else subsets())),
                     key=lambda r: (-r.net, r.asks_model, len(r.features), r.features))
    return results[0].features, results


def subsets(names: Sequence[str] = FEATURES) -> list[tuple[str, ...]]:
    """Every non-empty subset of `names`, the smaller first.

    >>> subsets(("score", "lead"))
    [('score',), ('lead',), ('score', 'lead')]
    """
    return [c for k in range(1, len(names) + 1) for c in combinations(names, k)]
