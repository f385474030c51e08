"""Accuracy over a query file (`stackroute eval`): routing success, argument success, tokens,
calls and latency, per query and summarised."""

from __future__ import annotations

import json
import math
import statistics
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stackroute.runtime.errors import InputError
from stackroute.runtime.governance import RunStatus
from stackroute.runtime.machine import StackMachine
from stackroute.runtime.state import RunState
from stackroute.runtime.tree import CapabilityTree
from stackroute.server.routing.abstention import verdicts


@dataclass(frozen=True)
class Query:
    id: str
    query: str
    gold: tuple[str, ...]
    args: tuple[Mapping[str, Any], ...] | None
    tags: tuple[str, ...]

    @classmethod
    def from_record(cls, d: Mapping[str, Any], *, default_id: object = "") -> Query:
        """A query object of FORMAT.md (a line of a queries file, or a generated query)."""
        return cls(id=str(d.get("id", default_id)), query=str(d["query"]),
                   gold=tuple(d.get("gold", [])),
                   args=tuple(d["args"]) if d.get("args") is not None else None,
                   tags=tuple(d.get("tags", [])))


def read_queries(path: str | Path, *, limit: int | None = None) -> list[Query]:
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                out.append(Query.from_record(json.loads(line), default_id=n))
            except (ValueError, KeyError, TypeError) as e:
                raise InputError(f"{path}:{n}: expected a query object with 'query' and "
                                 f"'gold' (FORMAT.md), got {line[:80]!r}: {e}") from e
            if limit is not None and len(out) >= limit:
                break
    return out


@dataclass
class QueryResult:
    id: str
    tags: tuple[str, ...]
    gold: tuple[str, ...]
    called: tuple[str, ...]
    is_success: bool
    is_args_success: bool
    outcome: str
    usage: dict[str, Any]
    format_failures: int
    error: str | None = None
    query: str = ""
    arguments: tuple[Mapping[str, Any], ...] = ()  # each call's arguments, in call order
    gold_args: tuple[Mapping[str, Any], ...] | None = None
    wall_ms: float = 0.0  # the request's wall time, approvals included
    params: ParamCounts = field(default_factory=lambda: ParamCounts())
    # per call, the arguments the model wrote instead of taking them from the request
    written_values: tuple[tuple[str, ...], ...] = ()
    # the values the last call waits for (it asked the user; counted among `called` with
    # the arguments it had: an eval has no one to answer)
    asked_values: tuple[str, ...] = ()
    # the out-of-scope check's verdicts (`abstention.Verdict.detail`), where the run met it
    abstention: tuple[Mapping[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "query": self.query, "tags": list(self.tags),
                "gold": list(self.gold), "gold_args": None if self.gold_args is None
                else [dict(a) for a in self.gold_args],
                "called": list(self.called), "arguments": [dict(a) for a in self.arguments],
                "success": self.is_success, "args_success": self.is_args_success,
                "outcome": self.outcome, "usage": self.usage,
                "format_failures": self.format_failures, "wall_ms": round(self.wall_ms, 1),
                "params": self.params.to_dict(), "error": self.error,
                "written_values": [list(w) for w in self.written_values],
                "asked_values": list(self.asked_values),
                "abstention": [dict(v) for v in self.abstention]}


@dataclass(frozen=True)
class ParamCounts:
    """Seal-Tools' parameter metric for one query: (leaf, name, value) triples predicted,
    gold, and in both (values compared after schema coercion)."""

    predicted: int = 0
    gold: int = 0
    matched: int = 0

    def __add__(self, other: ParamCounts) -> ParamCounts:
        return ParamCounts(self.predicted + other.predicted, self.gold + other.gold,
                           self.matched + other.matched)

    def to_dict(self) -> dict[str, int]:
        return {"predicted": self.predicted, "gold": self.gold, "matched": self.matched}

    def prf(self) -> dict[str, float]:
        precision = self.matched / self.predicted if self.predicted else 0.0
        recall = self.matched / self.gold if self.gold else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return {"param_precision": precision, "param_recall": recall, "param_f1": f1}


def run_query(machine: StackMachine, query: Query, *, auto_approve: bool = True) -> RunState:
    """The query's run, approved at every gate (`auto_approve`); it stops at a call that
    waits for values (nobody answers an eval's questions)."""
    state = machine.start(query.query, run_id=f"eval-{query.id}")
    while True:
        machine.run(state)
        pending = state.pending
        if state.status is RunStatus.PAUSED and auto_approve and pending is not None \
                and not pending.is_waiting_for_values:
            machine.approve(state, pending.digest)
            continue
        return state


def score(tree: CapabilityTree, query: Query, state: RunState, *,
          wall_ms: float = 0.0) -> QueryResult:
    calls = list(state.calls)
    asked: tuple[str, ...] = ()
    if state.pending is not None and state.pending.is_waiting_for_values:
        asked = state.pending.missing_values  # the leaf it chose, without what it asks
        calls.append({"path": state.pending.path, "arguments": state.pending.arguments})
    called = tuple(c["path"] for c in calls)
    arguments = tuple(c["arguments"] if isinstance(c["arguments"], Mapping) else {}
                      for c in calls)
    is_success = called == query.gold
    is_args_success = is_success
    if is_success and query.args is not None:
        for call, gold_args in zip(calls, query.args, strict=False):
            leaf = tree.get(call["path"])
            schema = leaf.parameters if leaf is not None else None
            if not arguments_equal(call["arguments"], gold_args, schema):
                is_args_success = False
    return QueryResult(id=query.id, tags=query.tags, gold=query.gold, called=called,
                       is_success=is_success, is_args_success=is_args_success,
                       outcome=state.status.value, usage=state.usage.to_dict(),
                       format_failures=state.num_format_failures, error=state.error,
                       query=query.query, arguments=arguments, gold_args=query.args,
                       wall_ms=wall_ms, params=param_counts(tree, query, called, arguments),
                       written_values=tuple(tuple(c.get("written_values", ()))
                                            for c in state.calls),
                       asked_values=asked, abstention=verdicts(state.trace))


def param_counts(tree: CapabilityTree, query: Query, called: tuple[str, ...],
                 arguments: tuple[Mapping[str, Any], ...]) -> ParamCounts:
    """Predicted, gold and matched (leaf, name, value) triples; zero gold where the query
    file gives no arguments."""
    if query.args is None:
        return ParamCounts()

    def triples(paths: Iterable[str], args: Iterable[Mapping[str, Any]],
                ) -> set[tuple[str, str, str]]:
        out: set[tuple[str, str, str]] = set()
        for path, values in zip(paths, args, strict=False):
            leaf = tree.get(path)
            props: Mapping[str, Any] = ((leaf.parameters if leaf is not None else None)
                                        or {}).get("properties", {})
            out.update((path, k, _norm(v, props.get(k, {}))) for k, v in values.items())
        return out

    predicted = triples(called, arguments)
    gold = triples(query.gold, query.args)
    return ParamCounts(len(predicted), len(gold), len(predicted & gold))


def arguments_equal(predicted: Mapping[str, Any], gold: Mapping[str, Any],
                    schema: Mapping[str, Any] | None) -> bool:
    """Gold arguments equal the predicted ones after coercion to the schema's types (gold
    data often writes numbers as strings, so compare leniently, as Seal-Tools' own
    evaluator does: by string form after coercion)."""
    props: Mapping[str, Any] = (schema or {}).get("properties", {})
    if set(predicted) != set(gold):
        return False
    return all(_norm(predicted[k], props.get(k, {})) == _norm(gold[k], props.get(k, {}))
               for k in gold)


def _norm(value: Any, schema: Mapping[str, Any]) -> str:
    kind = schema.get("type")
    try:
        if kind == "integer" and not isinstance(value, bool):
            value = int(float(value))
        elif kind == "number" and not isinstance(value, bool):
            value = float(value)
    except (TypeError, ValueError):
        pass
    if isinstance(value, str):
        return value.strip().lower()
    return json.dumps(value, sort_keys=True).lower()


@dataclass
class EvalSummary:
    num_queries: int = 0
    results: list[QueryResult] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        rs = self.results
        n = max(len(rs), 1)
        by_tag: dict[str, list[bool]] = {}
        for r in rs:
            for t in r.tags:
                by_tag.setdefault(t, []).append(r.is_success)
        lat = sorted(r.usage.get("latency_ms", 0.0) for r in rs)
        wall = sorted(r.wall_ms for r in rs)
        params = sum((r.params for r in rs), ParamCounts())
        # Gold [] (no capability applies): success is no call; any call is a tool
        # hallucination (When2Call's term).
        out_of_scope = [not r.called for r in rs if not r.gold]
        in_scope = [r.is_success for r in rs if r.gold]
        return {
            "num_queries": len(rs),
            "success": sum(r.is_success for r in rs) / n,
            "in_scope_success": sum(in_scope) / len(in_scope) if in_scope else None,
            "out_of_scope_no_call": sum(out_of_scope) / len(out_of_scope)
            if out_of_scope else None,
            "tool_hallucination": 1 - sum(out_of_scope) / len(out_of_scope)
            if out_of_scope else None,
            "args_success": sum(r.is_args_success for r in rs) / n,
            "by_tag": {t: sum(v) / len(v) for t, v in sorted(by_tag.items())},
            "prompt_tokens_mean": _mean(r.usage.get("prompt_tokens", 0) for r in rs),
            "prefill_tokens_mean": _mean(r.usage.get("prefill_tokens", 0) for r in rs),
            "cached_tokens_mean": _mean(r.usage.get("cached_tokens", 0) for r in rs),
            "model_calls_mean": _mean(r.usage.get("model_calls", 0) for r in rs),
            "latency_ms_p50": statistics.median(lat) if lat else 0.0,
            "wall_ms_p50": _quantile(wall, 0.5),
            "wall_ms_p95": _quantile(wall, 0.95),
            "format_failures": sum(r.format_failures for r in rs),
            # calls made with a value the request did not give (the model wrote it)
            "calls_with_written_values": sum(bool(w) for r in rs for w in r.written_values),
            # requests whose call waits for values the request did not hold (it asked)
            "queries_that_asked": sum(bool(r.asked_values) for r in rs),
            **params.prf(),
            "results": [r.to_dict() for r in rs],
        }


def _quantile(ordered: list[float], q: float) -> float:
    """The nearest-rank quantile of an ascending list (0.0 for none)."""
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def _mean(values: Iterable[float]) -> float:
    vs = list(values)
    return sum(vs) / len(vs) if vs else 0.0


def evaluate(machine: StackMachine, tree: CapabilityTree, queries: list[Query],
             ) -> Iterator[QueryResult]:
    """Run and score each query; a failing query is counted, never fatal."""
    for q in queries:
        started_s = time.perf_counter()
        try:
            state = run_query(machine, q)
            yield score(tree, q, state, wall_ms=(time.perf_counter() - started_s) * 1000)
        except InputError as e:
            yield QueryResult(id=q.id, tags=q.tags, gold=q.gold, called=(), is_success=False,
                              is_args_success=False, outcome="error", usage={},
                              format_failures=0, error=str(e), query=q.query,
                              gold_args=q.args,
                              wall_ms=(time.perf_counter() - started_s) * 1000)
