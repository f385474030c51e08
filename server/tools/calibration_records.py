"""What calibration measures of a model: its log-probabilities on the menus of dev requests.

For every dev query, the menus on its gold path (teacher forcing: each level's fresh frame, as
the runtime would build it; the root alone for an out-of-scope query, whose gold answer is
`DONE`) are put to the model once without any bias, and each distinct menu once more with the
neutral request (the contrast). Because the prior and the contrast are additive in log space,
every setting of the guided policy can then be scored offline from these numbers
(`calibrate.py`): a decision is right when `argmax(log p - strength * log p_neutral + bias)`
is the gold option.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from stackroute.runtime.errors import InputError
from stackroute.runtime.machine import StackMachine
from stackroute.runtime.menu import CompletionState, Menu
from stackroute.runtime.prompt import PromptLayout, PromptStyle
from stackroute.runtime.router import RoutingRequest, ScriptedRouter
from stackroute.runtime.tree import CapabilityTree, Node
from stackroute.server.embeddings.leaf_index import Evidence, EvidenceSource
from stackroute.server.engines.base import Engine
from stackroute.server.routing.contrast import NeutralContrast
from stackroute.server.routing.prior import menu_prior
from stackroute.server.routing.recovery import RecoveryOptions
from stackroute.server.tools.evaluate import Query


@dataclass(frozen=True)
class Dataset:
    """Dev queries over one catalog, rendered with one prompt style."""

    name: str
    tree: CapabilityTree
    queries: list[Query]
    style: PromptStyle


@dataclass
class MenuRecord:
    """One gold-path menu: the model's raw and neutral log-probs and the request's evidence."""

    dataset: str
    query_id: str
    node: Node
    menu: Menu
    gold: str
    raw: dict[str, float]
    neutral: dict[str, float]
    evidence: Evidence

    def to_dict(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "query_id": self.query_id, "node": self.node.path_str,
                "options": list(self.menu.options), "gold": self.gold,
                "raw": {o: round(v, 5) for o, v in self.raw.items()},
                "neutral": {o: round(v, 5) for o, v in self.neutral.items()},
                "evidence_top": [[p, round(s, 4)] for p, s in self.evidence.top(3)]}


def check_gold_paths(tree: CapabilityTree, queries: Sequence[Query], *, source: str) -> None:
    """An `InputError` naming the first query whose gold path is not a leaf of `tree`."""
    for q in queries:
        for path in q.gold:
            node = tree.get(path)
            if node is None or not node.is_leaf:
                what = "is not in the catalog" if node is None else "is a router, not a leaf"
                raise InputError(f"{source}: query {q.id!r}: gold path {path!r} {what}; "
                                 "gold lists the leaf paths a correct run calls (FORMAT.md)")


def gold_menus(machine: StackMachine, query: Query) -> Iterator[tuple[RoutingRequest, str]]:
    """Each fresh frame on the path to the first gold leaf (or the root for an out-of-scope
    request, whose gold answer is DONE), as the request the runtime would make."""
    path = query.gold[0].split("/") if query.gold else []
    stops = range(len(path)) if path else range(1)
    for depth in stops:
        state = machine.start(query.query, at="/".join(path[:depth]))
        frame = state.top()
        node = machine.tree.node(frame.node_path)
        request = RoutingRequest(run_id="calibrate", step=0, depth=len(state.stack) - 1,
                                 task=query.query, node=node,
                                 menu=machine.menu_for(state, frame),
                                 prompt=machine.layout.routing_prompt(state),
                                 layout=machine.layout)
        yield request, path[depth] if path else CompletionState.DONE.value


def collect(engine: Engine, evidence: EvidenceSource, dev: Dataset, *,
            on_query: Callable[[], None] | None = None) -> list[MenuRecord]:
    """The model's log-probs on every gold-path menu of `dev` (one call per menu, plus one
    per distinct menu for the neutral request)."""
    machine = StackMachine(dev.tree, ScriptedRouter([]), layout=PromptLayout(dev.tree, dev.style))
    contrast = NeutralContrast(engine, strength=1.0)
    records = []
    for query in dev.queries:
        for request, gold in gold_menus(machine, query):
            result = engine.choose(request.prompt, request.menu.options)
            neutral_bias, _ = contrast.bias(request)
            records.append(MenuRecord(
                dataset=dev.name, query_id=query.id, node=request.node, menu=request.menu,
                gold=gold, raw={o: math.log(max(p, 1e-300))
                                for o, p in result.probabilities.items()},
                neutral={o: -b for o, b in neutral_bias.items()},
                evidence=evidence.for_request(query.query)))
        if on_query is not None:
            on_query()
    return records


def decisions_right(records: Sequence[MenuRecord], options: RecoveryOptions) -> list[bool]:
    """Whether `argmax(log p - strength * log p_neutral + prior bias)` is gold, per menu."""
    prior = options.prior
    out = []
    for r in records:
        bias = {o: 0.0 for o in r.menu.options}
        if options.evidence_weight > 0:
            bias = menu_prior(r.evidence, r.node, r.menu, calls=(), options=prior).bias
        strength = options.contrast_strength if options.is_contrast_enabled else 0.0
        score = {o: r.raw[o] - strength * r.neutral[o] + bias[o] for o in r.menu.options}
        out.append(max(score, key=lambda o: score[o]) == r.gold)
    return out


def evidence_right(records: Sequence[MenuRecord]) -> list[bool]:
    """Evidence alone (the child with the best leaf; DONE never)."""
    out = []
    for r in records:
        scores = {c: r.evidence.node_score("/".join((*r.node.path, c)))
                  for c in r.menu.children}
        out.append(max(scores, key=lambda c: scores[c]) == r.gold if scores else False)
    return out


def path_accuracy(records: Sequence[MenuRecord], right: Sequence[bool]) -> float:
    """Share of queries whose every gold-path decision is right."""
    by_query: dict[tuple[str, str], bool] = {}
    for r, ok in zip(records, right, strict=True):
        key = (r.dataset, r.query_id)
        by_query[key] = by_query.get(key, True) and ok
    return sum(by_query.values()) / max(len(by_query), 1)


def accuracy_by_dataset(records: Sequence[MenuRecord],
                        judge: Callable[[Sequence[MenuRecord]], list[bool]],
                        ) -> dict[str, dict[str, float]]:
    """Decision and path accuracy per dataset, each menu judged by `judge`."""
    out = {}
    for name in sorted({r.dataset for r in records}):
        subset = [r for r in records if r.dataset == name]
        right = judge(subset)
        out[name] = {"decision_accuracy": round(sum(right) / len(right), 4),
                     "path_accuracy": round(path_accuracy(subset, right), 4)}
    return out


def confidence_auroc(records: Sequence[MenuRecord]) -> float:
    """How well the model's own top probability tells right from wrong picks (0.5: not at
    all): the case for (or against) a confidence threshold for backtracking."""
    pairs = []
    for r in records:
        pick = max(r.raw, key=lambda o: r.raw[o])
        pairs.append((math.exp(r.raw[pick]), pick == r.gold))
    right = [p for p, ok in pairs if ok]
    wrong = [p for p, ok in pairs if not ok]
    if not right or not wrong:
        return math.nan
    wins = sum((a > b) + 0.5 * (a == b) for a in right for b in wrong)
    return round(wins / (len(right) * len(wrong)), 4)

