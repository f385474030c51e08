"""Fitting the abstention check for a catalog on the operator's own dev queries
(`stackroute calibrate --abstention`).

Each dev query is judged where the guided router would first call: the leaf its evidence
ranks first (`evidence_leaf_sample`, no routing call). The check's features there, labelled
by the query's gold (`[]`: no leaf serves it, abstaining is right; the evidence's leaf is the
gold leaf: calling is right; another leaf: wrong either way, not fitted), are what
`abstention_fit` chooses features on (leave-one-out) and fits. Without an engine the probe
asks the model nothing and only the features that need no model call are considered.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from stackroute.runtime.errors import InputError
from stackroute.runtime.tree import CapabilityTree
from stackroute.runtime.usage import Usage
from stackroute.server.embeddings.leaf_index import EvidenceSource
from stackroute.server.engines.base import Engine
from stackroute.server.routing.abstention import AbstentionCheck, AbstentionOptions
from stackroute.server.tools.abstention_fit import (
    FEATURES,
    MODEL_FEATURES,
    CrossValidated,
    Fitted,
    Label,
    Sample,
    choose_features,
    fit_abstention,
    subsets,
)
from stackroute.server.tools.evaluate import Query

MIN_OUT_OF_SCOPE = 5  # dev queries no leaf serves: fewer cannot place a threshold
MIN_SUCCESSES = 5  # in-scope queries whose evidence leaf is their gold leaf


@dataclass(frozen=True)
class AbstentionCalibration:
    fitted: Fitted
    choice: list[CrossValidated]  # every feature subset's leave-one-out result, best first
    samples: list[Sample]
    model_calls: int  # what the probe asked the model

    def measured(self) -> dict[str, Any]:
        return {**self.fitted.measured, "chosen_by": "leave-one-out",
                "probe_model_calls": self.model_calls,
                "feature_choice": [asdict(r) for r in self.choice[:8]]}


def label(leaf: str, gold: Sequence[str]) -> Label:
    """The right answer at the first leaf: abstain where nothing serves the request.

    >>> label("bank/send", []), label("bank/send", ["bank/send"]), label("bank/pay", ["bank/send"])
    (<Label.ABSTAIN: 'abstain'>, <Label.CALL: 'call'>, <Label.EITHER: 'either'>)
    """
    if not gold:
        return Label.ABSTAIN
    return Label.CALL if leaf == gold[0] else Label.EITHER


def evidence_leaf_sample(check: AbstentionCheck, tree: CapabilityTree,
                         query: Query) -> tuple[str, Sample, Usage]:
    """The check's features at the leaf the evidence ranks first for `query` (the guided
    router's first leaf where it follows its evidence), labelled by the query's gold."""
    evidence = check.evidence.for_request(query.query)
    best, _ = evidence.best()
    report = evidence.index.report_paths[evidence.index.paths.index(best)]
    features, usage = check.features(query.query, tree.node(best))
    return best, Sample(features, label(report, query.gold)), usage


def require_out_of_scope(queries: Sequence[Query]) -> None:
    """Refuse, before anything is measured, dev queries too few of which no leaf serves."""
    num_out = sum(not q.gold for q in queries)
    if num_out < MIN_OUT_OF_SCOPE:
        raise InputError(f"fitting the abstention check needs at least {MIN_OUT_OF_SCOPE} dev "
                         f"queries no leaf serves (gold []); the queries hold {num_out}")


def calibrate_abstention(engine: Engine | None, evidence: EvidenceSource,
                         tree: CapabilityTree, queries: Sequence[Query], *,
                         max_call_loss: float,
                         on_query: Callable[[], None] | None = None) -> AbstentionCalibration:
    """The check fitted on `queries` (dev), its features chosen by leave-one-out. `engine`
    None: a model-free probe, and only model-free features."""
    require_out_of_scope(queries)
    probe = AbstentionOptions(threshold=math.inf, is_judge_enabled=engine is not None)
    check = AbstentionCheck(engine, probe, evidence)
    samples: list[Sample] = []
    calls = 0
    for query in queries:
        # The check judges a run's first leaf; which gold leaf of a multi-call request comes
        # first is not fixed, so those requests are not samples.
        if len(query.gold) <= 1:
            _, sample, usage = evidence_leaf_sample(check, tree, query)
            samples.append(sample)
            calls += usage.model_calls
        if on_query is not None:
            on_query()
    num_out = sum(s.label is Label.ABSTAIN for s in samples)
    num_calls = sum(s.label is Label.CALL for s in samples)
    if num_calls < MIN_SUCCESSES:
        raise InputError(
            f"fitting the abstention check needs at least {MIN_SUCCESSES} in-scope dev queries "
            f"whose best evidence leaf is their gold leaf; got {num_calls} of "
            f"{len(samples) - num_out}")
    num_in_scope = sum(s.label is not Label.ABSTAIN for s in samples)
    allowed = FEATURES if engine is not None else \
        tuple(f for f in FEATURES if f not in MODEL_FEATURES)
    features, choice = choose_features(samples, max_call_loss=max_call_loss,
                                       num_in_scope=num_in_scope, candidates=subsets(allowed))
    fitted = fit_abstention(samples, max_call_loss=max_call_loss, num_in_scope=num_in_scope,
                            features=features)
    return AbstentionCalibration(fitted, choice, samples, calls)

