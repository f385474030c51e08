"""The evidence prior: leaf evidence turned into an additive log-space bias per menu option.

A child's evidence is its subtree's score; a completion state gets a virtual score that says
when leaving is the better bet:
- `DONE` at the root: `out_of_scope_score` (nothing in the catalog matches better than this),
  or, once the run has made calls, the best called leaf's score minus `done_gap` (what is left
  is much weaker than what was done);
- `BACK` (and `DONE` in an inner frame that has output): the best leaf *outside* this subtree
  minus `back_gap` (the request is better served elsewhere);
- `OTHER` (a shortlisted menu, `shortlist.py`): its best hidden option's score.
Leaves the run already called count as absent, so a multi-call request moves on. The bias of
option `o` is `weight * (v(o) - max v) `, `v = score / temperature`, floored at `-max_bias`:
the best-supported option keeps its logit and the others are pushed down.

>>> options = PriorOptions(weight=1.0, temperature=0.1, out_of_scope_score=0.3)
>>> bias_from_scores({"a": 0.6, "b": 0.4, "DONE": 0.3}, options)
{'a': 0.0, 'b': -2.0, 'DONE': -3.0}
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from stackroute.runtime.menu import CompletionState, Menu
from stackroute.runtime.tree import Node
from stackroute.server.embeddings.leaf_index import Aggregate, Evidence


@dataclass(frozen=True, kw_only=True)
class PriorOptions:
    weight: float = 1.0  # nats of bias per nat of prior log-probability; 0 turns it off
    temperature: float = 0.05  # cosine units per nat
    aggregate: Aggregate = Aggregate.MAX
    out_of_scope_score: float = 0.3  # DONE's virtual score at the root before any call
    done_gap: float = 0.15
    back_gap: float = 0.1
    max_bias: float = 20.0  # floor of -max_bias nats: the model can still overrule


@dataclass(frozen=True)
class MenuPrior:
    """The evidence score of every option (virtual for completion states) and its bias."""

    scores: dict[str, float]
    bias: dict[str, float]


def menu_prior(evidence: Evidence, node: Node, menu: Menu, *, calls: tuple[str, ...],
               options: PriorOptions) -> MenuPrior:
    """The prior over `menu` at `node` for a run that has made `calls` (report paths)."""
    called = set(calls)
    called_best = max((float(evidence.scores[row])
                       for row, path in enumerate(evidence.index.report_paths) if path in called),
                      default=-math.inf)
    remaining = evidence.without(calls)
    scores: dict[str, float] = {}
    for name in menu.children:
        child = node.child(name)
        if child is None:
            raise KeyError(f"menu option {name!r} is not a child of {node.path_str or '<root>'}")
        scores[name] = remaining.node_score(child.path_str, aggregate=options.aggregate,
                                            temperature=options.temperature)
    after_calls = float(called_best) - options.done_gap
    elsewhere = -math.inf if node.depth == 0 else \
        remaining.outside_score(node.path_str) - options.back_gap
    for state in menu.states:
        if state is CompletionState.OTHER:  # a shortlisted menu: its best hidden option
            scores[state.value] = max((remaining.node_score(
                c.path_str, aggregate=options.aggregate, temperature=options.temperature)
                for c in node.children if c.name not in menu.children), default=-math.inf)
        elif state is CompletionState.BACK:
            scores[state.value] = elsewhere
        elif node.depth == 0:
            scores[state.value] = max(options.out_of_scope_score, after_calls)
        else:
            scores[state.value] = max(elsewhere, after_calls)
    return MenuPrior(scores=scores, bias=bias_from_scores(scores, options))


def bias_from_scores(scores: Mapping[str, float], options: PriorOptions) -> dict[str, float]:
    """`weight * (score - best) / temperature`, floored at `-max_bias` (and 0 for all when
    no option has a finite score)."""
    finite = [s for s in scores.values() if math.isfinite(s)]
    if not finite or options.weight == 0:
        return {name: 0.0 for name in scores}
    best = max(finite)
    return {name: round(max(-options.max_bias, options.weight * (s - best) / options.temperature),
                        6) if math.isfinite(s) else -options.max_bias
            for name, s in scores.items()}
