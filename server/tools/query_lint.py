"""`stackroute lint --queries FILE`: route sample queries down the tree, one constrained
decision per level, and report which branches attract the wrong choices.

Each query descends from the root: at every router the engine picks from the same menu and
prompt the stack machine would show (`build_machine`'s layout and menus), and the descent
follows the model's pick, not the gold one, so the report shows where a real run would have
gone. Leaf arguments are not generated (they do not change the route, and they cost more than
the routing calls). A query is right when it reaches one of its gold leaves; for a multi-tool
query any gold leaf counts (the first one of the model's choice). Gold leaves that the tree
does not hold are reported, never guessed.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from stackroute.runtime.errors import InputError
from stackroute.runtime.machine import StackMachine
from stackroute.runtime.menu import CompletionState
from stackroute.runtime.tree import PATH_SEP, CapabilityTree
from stackroute.runtime.usage import Usage
from stackroute.server.engines.base import Engine
from stackroute.server.routing.router import build_machine

log = logging.getLogger(__name__)
NOTHING_APPLIES = CompletionState.DONE.value  # the right root answer for a query with no gold


class SampleQuery(Protocol):
    """A query with its gold leaf paths (`bench.evaluate.Query` is one)."""

    @property
    def id(self) -> str: ...

    @property
    def query(self) -> str: ...

    @property
    def gold(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class RouteStep:
    """One routing decision: where, what the model chose, what gold allowed."""

    node: str  # router path ("" is the root)
    choice: str
    accepted: tuple[str, ...]  # the options on some gold path from here
    probability: float  # of the choice
    gold_probability: float  # of the likeliest accepted option


@dataclass
class QueryRoute:
    id: str
    query: str
    gold: tuple[str, ...]
    steps: list[RouteStep] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    error: str | None = None

    @property
    def first_wrong_level(self) -> int | None:
        """0 for the root decision; None when every decision was on a gold path."""
        for level, step in enumerate(self.steps):
            if step.choice not in step.accepted:
                return level
        return len(self.steps) if self.error is not None else None

    @property
    def is_correct(self) -> bool:
        return self.error is None and self.first_wrong_level is None

    @property
    def gold_top(self) -> str:
        """The top-level domain this query is scored under: the model's pick when it was a
        gold one, else the first gold leaf's (or DONE when nothing should apply)."""
        if self.steps and self.steps[0].choice in self.steps[0].accepted:
            return self.steps[0].choice
        return self.gold[0].split(PATH_SEP)[0] if self.gold else NOTHING_APPLIES

    @property
    def chosen_top(self) -> str:
        return self.steps[0].choice if self.steps else "<error>"

    @property
    def chosen_path(self) -> str:
        return PATH_SEP.join(s.choice for s in self.steps)

    def to_dict(self) -> dict[str, Any]:
        wrong = self.first_wrong_level
        at = self.steps[wrong] if wrong is not None and wrong < len(self.steps) else None
        return {"id": self.id, "query": self.query, "gold": list(self.gold),
                "chosen_path": self.chosen_path, "is_correct": self.is_correct,
                "first_wrong_level": wrong,
                "wrong_at": None if at is None else {
                    "node": at.node, "choice": at.choice, "expected": list(at.accepted),
                    "probability": round(at.probability, 4),
                    "gold_probability": round(at.gold_probability, 4)},
                "usage": self.usage.to_dict(), "error": self.error}


@dataclass
class ConfusionReport:
    routes: list[QueryRoute] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # ids whose gold leaves are not in the tree

    def confusion(self) -> dict[str, dict[str, int]]:
        """gold top-level → chosen top-level → queries."""
        table: dict[str, Counter[str]] = {}
        for r in self.routes:
            table.setdefault(r.gold_top, Counter())[r.chosen_top] += 1
        return {g: dict(c.most_common()) for g, c in sorted(table.items())}

    def domains(self) -> dict[str, dict[str, float]]:
        """Per gold top-level: queries, top-level accuracy, leaf accuracy."""
        out: dict[str, dict[str, float]] = {}
        for r in self.routes:
            d = out.setdefault(r.gold_top, {"queries": 0, "top_level_accuracy": 0.0,
                                            "leaf_accuracy": 0.0})
            d["queries"] += 1
            d["top_level_accuracy"] += r.chosen_top == r.gold_top
            d["leaf_accuracy"] += r.is_correct
        for d in out.values():
            d["top_level_accuracy"] = round(d["top_level_accuracy"] / d["queries"], 4)
            d["leaf_accuracy"] = round(d["leaf_accuracy"] / d["queries"], 4)
        return dict(sorted(out.items()))

    def most_confused(self, limit: int = 10) -> list[tuple[str, str, int]]:
        pairs = Counter((r.gold_top, r.chosen_top) for r in self.routes
                        if r.gold_top != r.chosen_top)
        return [(g, c, n) for (g, c), n in pairs.most_common(limit)]

    def wrong_by_level(self) -> dict[int, int]:
        counts = Counter(r.first_wrong_level for r in self.routes
                         if r.first_wrong_level is not None)
        return dict(sorted(counts.items()))

    def summary(self) -> dict[str, Any]:
        rs = self.routes
        n = max(len(rs), 1)

        def mean(key: str) -> float:
            return round(float(sum(getattr(r.usage, key) for r in rs)) / n, 2)

        return {
            "num_queries": len(rs),
            "num_skipped": len(self.skipped),
            "num_errors": sum(r.error is not None for r in rs),
            "leaf_accuracy": round(sum(r.is_correct for r in rs) / n, 4),
            "top_level_accuracy": round(sum(r.chosen_top == r.gold_top for r in rs) / n, 4),
            "prompt_tokens_mean": mean("prompt_tokens"),
            "prefill_tokens_mean": mean("prefill_tokens"),
            "cached_tokens_mean": mean("cached_tokens"),
            "model_calls_mean": mean("model_calls"),
            "latency_ms_mean": mean("latency_ms"),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.summary(),
            "wrong_by_level": {str(k): v for k, v in self.wrong_by_level().items()},
            "domains": self.domains(),
            "confusion": self.confusion(),
            "most_confused": [{"gold": g, "chosen": c, "queries": k}
                              for g, c, k in self.most_confused(25)],
            "wrong": [r.to_dict() for r in self.routes if not r.is_correct],
            "skipped": self.skipped,
        }

    def render_text(self, *, max_rows: int = 15) -> str:
        s = self.summary()
        lines = [f"{s['num_queries']} queries routed ({s['num_skipped']} skipped: gold not in "
                 f"the tree; {s['num_errors']} errors): leaf accuracy {s['leaf_accuracy']:.2f}, "
                 f"top-level accuracy {s['top_level_accuracy']:.2f}, "
                 f"{s['prompt_tokens_mean']:.0f} prompt tokens and "
                 f"{s['model_calls_mean']:.1f} calls per query"]
        levels = ", ".join(f"level {k}: {v}" for k, v in self.wrong_by_level().items())
        lines.append(f"first wrong decision at: {levels or 'none'}")
        confusion = self.confusion()
        lines.append(f"\nby gold top-level domain (worst first, {max_rows} shown):")
        lines.append(f"  {'domain':<28} {'n':>4} {'top':>5} {'leaf':>5}  wrong top-level picks")
        ranked = sorted(self.domains().items(),
                        key=lambda kv: (kv[1]["leaf_accuracy"], -kv[1]["queries"], kv[0]))
        for domain, d in ranked[:max_rows]:
            wrong = ", ".join(f"{c} x{k}" for c, k in confusion[domain].items() if c != domain)
            lines.append(f"  {domain[:28]:<28} {int(d['queries']):>4} "
                         f"{d['top_level_accuracy']:>5.2f} {d['leaf_accuracy']:>5.2f}  "
                         f"{wrong[:70]}")
        pairs = self.most_confused(max_rows)
        if pairs:
            lines.append("\nmost frequent wrong top-level choices (gold -> chosen):")
            lines.extend(f"  {g} -> {c}: {k}" for g, c, k in pairs)
        wrong_routes = [r for r in self.routes if not r.is_correct][:max_rows]
        if wrong_routes:
            lines.append("\nqueries that went wrong (first wrong decision):")
        for r in wrong_routes:
            level = r.first_wrong_level
            step = r.steps[level] if level is not None and level < len(r.steps) else None
            where = (f"level {level} at {step.node or '<root>'}: chose {step.choice} "
                     f"(p={step.probability:.2f}), gold {'|'.join(step.accepted)} "
                     f"(p={step.gold_probability:.2f})") if step else f"error: {r.error}"
            lines.append(f"  {r.id}: {r.query[:70]!r}\n      {where}")
        return "\n".join(lines)


def query_confusion(tree: CapabilityTree, engine: Engine, queries: Sequence[SampleQuery], *,
                    limit: int | None = None,
                    machine: StackMachine | None = None) -> ConfusionReport:
    """Route up to `limit` queries step by step and collect where they go wrong.

    `machine` supplies the prompt layout and menus (default: `build_machine(tree, engine)`);
    a query that fails (e.g. a prompt beyond the model's context) is recorded, never fatal."""
    machine = machine or build_machine(tree, engine)
    report = ConfusionReport()
    for q in queries[:limit] if limit is not None else queries:
        missing = [g for g in q.gold if g not in tree or not tree.node(g).is_leaf]
        if missing:
            report.skipped.append(q.id)
            continue
        route = route_query(machine, engine, q)
        report.routes.append(route)
        log.info("query %s: %s -> %s (%d calls, %.0f ms)", q.id,
                 "right" if route.is_correct else f"wrong at level {route.first_wrong_level}",
                 route.chosen_path or route.error, route.usage.model_calls,
                 route.usage.latency_ms)
    return report


def route_query(machine: StackMachine, engine: Engine, query: SampleQuery) -> QueryRoute:
    """Descend from the root following the engine's choices until a leaf or a completion."""
    route = QueryRoute(id=query.id, query=query.query, gold=query.gold)
    tree = machine.tree
    gold_paths = [tuple(g.split(PATH_SEP)) for g in query.gold]
    path: tuple[str, ...] = ()
    while True:
        accepted = tuple(dict.fromkeys(
            g[len(path)] for g in gold_paths if g[:len(path)] == path and len(g) > len(path)))
        if not path and not gold_paths:
            accepted = (NOTHING_APPLIES,)
        try:
            state = machine.start(query.query, at=PATH_SEP.join(path),
                                  run_id=f"lint-{query.id}")
            menu = machine.menu_for(state, state.top())
            result = engine.choose(machine.layout.routing_prompt(state), menu.options)
        except InputError as e:  # e.g. the menu's prompt does not fit the context
            route.error = f"{type(e).__name__}: {e}"
            return route
        route.usage = route.usage + result.usage
        probs = result.probabilities
        route.steps.append(RouteStep(
            node=PATH_SEP.join(path), choice=result.choice, accepted=accepted,
            probability=probs.get(result.choice, 0.0),
            gold_probability=max((probs.get(a, 0.0) for a in accepted), default=0.0)))
        child = tree.get(PATH_SEP.join((*path, result.choice)))
        if child is None or child.is_leaf:  # a leaf, DONE or BACK: the route ends here
            return route
        path = (*path, result.choice)
