"""`stackroute bench right-call`: the right tool with the right arguments (issue 25).

Single-tool queries with gold arguments (first N in file order after `--offset`, no
selection), two modes side by side on the same queries and the same loaded engine:
- `gold-leaf`: the run starts at the gold leaf's parent with the product's layout, the leaf
  is taken as chosen and its arguments are made (routing is not measured). Methods:
  `candidates` (routing/arguments: one constrained choice per value over the request's
  candidates, the product's), `generate` (the whole object under the leaf's JSON schema,
  the router's behaviour before issue 25; slow: its grammar compiles per leaf schema) and
  `priors` (the product's `--argument-values priors`: the top candidate by prior, no model call
  except a value with no candidate: what the model's choice adds).
- `routing` (`--routing`): the product router from the root (`stackroute eval`'s options for
  the model: guided with its calibration where one ships, `--calibration none` for plain),
  then its arguments: routing success AND exact-call success.

Reported per mode: exact-call success (leaf and every argument equal after schema coercion,
no extra field: `tools/evaluate.arguments_equal`), Seal-Tools' parameter precision / recall /
F1 over (leaf, name, value) triples, model calls per request (mean and median), p50 / p95
wall time.

    stackroute bench right-call --split test --limit 60 [--model qwen2.5-coder-1.5b] \
        [--routing] [--engine transformers] --out DIR
    stackroute bench right-call --smoke      # 2 dev queries at the gold leaf, embedded model
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from stackroute.runtime.catalog import load_catalog
from stackroute.runtime.machine import StackMachine
from stackroute.runtime.router import RoutingRequest
from stackroute.runtime.tree import CapabilityTree, Node
from stackroute.server.engines.base import (
    Constraint,
    Engine,
    SamplingOptions,
)
from stackroute.server.engines.registry import create_engine
from stackroute.server.routing.arguments import ArgumentFiller
from stackroute.server.routing.arguments.meaning import ValueMeaning
from stackroute.server.routing.leaf_arguments import json_object
from stackroute.server.routing.options import (
    ArgumentValues,
    DraftSource,
    MissingValues,
    OptionalValues,
    Policy,
    RouterOptions,
)
from stackroute.server.routing.router import build_machine, default_embedder
from stackroute.server.settings import ServerSettings
from stackroute.server.tools.evaluate import (
    ParamCounts,
    Query,
    arguments_equal,
    param_counts,
    run_query,
    score,
)

ROOT = Path(__file__).resolve().parents[2]
SEAL_DIR = ROOT.parent / "shared" / "data" / "seal-tools"
SPLITS = {"dev": "dev.queries.jsonl", "test": "test.queries.jsonl",
          "test-ood": "test-ood.queries.jsonl"}
# A gold-leaf method: the engine, the request at the leaf's menu, the leaf, and how optional
# values are read (None: by the request's words alone) → the arguments and the model calls.
Method = Callable[[Engine, RoutingRequest, Node, ValueMeaning | None],
                  tuple[dict[str, Any], int]]


def _generate(engine: Engine, request: RoutingRequest, leaf: Node,
              meaning: ValueMeaning | None) -> tuple[dict[str, Any], int]:
    prompt = request.arguments_prompt(leaf)
    schema = leaf.parameters or {"type": "object", "properties": {}}
    generation = engine.generate(prompt, constraint=Constraint.json(schema),
                                 sampling=SamplingOptions(max_tokens=384))
    return json_object(generation.text) or {}, generation.usage.model_calls


# The gold-leaf methods write a value the request lacks (`MissingValues.WRITE`): they measure
# the arguments a call would carry, and a value asked of the user is as inexact as one made up.
def _candidates(engine: Engine, request: RoutingRequest, leaf: Node,
                meaning: ValueMeaning | None) -> tuple[dict[str, Any], int]:
    filled = ArgumentFiller(engine, missing=MissingValues.WRITE, meaning=meaning).fill(
        request, leaf)
    return json_object(filled.text) or {}, filled.usage.model_calls


def _priors(engine: Engine, request: RoutingRequest, leaf: Node,
            meaning: ValueMeaning | None) -> tuple[dict[str, Any], int]:
    """The product's `priors` argument values: each value the candidate with the top prior, no
    model call (only a value with no candidate falls back to the model's free JSON)."""
    filled = ArgumentFiller(engine, values=ArgumentValues.PRIORS, missing=MissingValues.WRITE,
                            meaning=meaning).fill(request, leaf)
    return json_object(filled.text) or {}, filled.usage.model_calls


METHODS: dict[str, Method] = {"candidates": _candidates, "generate": _generate,
                              "priors": _priors}


def single_tool_queries(path: Path, *, offset: int, limit: int) -> list[dict[str, Any]]:
    """Single-tool records that carry a gold arguments object (possibly empty: the right call
    then invents none), in file order."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    single = [r for r in rows if len(r.get("gold", [])) == 1 and r.get("args")]
    return single[offset:offset + limit]


def gold_leaf_row(engine: Engine, machine: StackMachine, tree: CapabilityTree, query: Query,
                  methods: Sequence[str], meaning: ValueMeaning | None = None,
                  ) -> dict[str, Any]:
    leaf = tree.get(query.gold[0])
    if leaf is None:
        raise ValueError(f"query {query.id}: gold leaf {query.gold[0]!r} is not in the catalog")
    parent = "/".join(query.gold[0].split("/")[:-1])
    state = machine.start(query.query, run_id=query.id, at=parent)
    request = machine.request_for(state)
    gold = dict(query.args[0]) if query.args else {}
    out: dict[str, Any] = {"id": query.id, "query": query.query, "gold": gold}
    for name in methods:
        t0 = time.perf_counter()
        predicted, calls = METHODS[name](engine, request, leaf, meaning)
        wall_ms = (time.perf_counter() - t0) * 1000
        counts = param_counts(tree, query, query.gold, (predicted,))
        out[name] = {"arguments": predicted, "model_calls": calls,
                     "wall_ms": round(wall_ms, 1), "params": counts.to_dict(),
                     "exact": arguments_equal(predicted, gold, leaf.parameters)}
    return out


def routing_row(machine: StackMachine, tree: CapabilityTree, query: Query) -> dict[str, Any]:
    t0 = time.perf_counter()
    state = run_query(machine, query)
    wall_ms = (time.perf_counter() - t0) * 1000
    result = score(tree, query, state, wall_ms=wall_ms)
    return {"id": query.id, "query": query.query, "gold": list(query.gold),
            "gold_args": dict(query.args[0]) if query.args else {},
            "routing": {"called": list(result.called), "arguments": [dict(a) for a in
                                                                     result.arguments],
                        "routed": result.is_success, "exact": result.is_args_success,
                        "model_calls": state.usage.model_calls, "wall_ms": round(wall_ms, 1),
                        "params": result.params.to_dict(), "outcome": result.outcome,
                        "asked_values": list(result.asked_values),
                        # decisions the evidence took after a frame's BACKs (recovery.py)
                        "recalls": sum(1 for e in state.trace if e.kind.value == "route"
                                       and "recall" in e.detail)}}


def summarise(results: Sequence[dict[str, Any]], name: str) -> dict[str, Any]:
    rows = [r[name] for r in results if name in r]
    if not rows:
        return {}
    counts = sum((ParamCounts(**r["params"]) for r in rows), ParamCounts())
    walls = sorted(r["wall_ms"] for r in rows)
    calls = [r["model_calls"] for r in rows]
    out: dict[str, Any] = {"queries": len(rows),
                           "exact": round(sum(r["exact"] for r in rows) / len(rows), 4)}
    if name == "routing":
        out["routed"] = round(sum(r["routed"] for r in rows) / len(rows), 4)
    out.update({k: round(v, 4) for k, v in counts.prf().items()})
    out.update(model_calls_mean=round(statistics.fmean(calls), 2),
               model_calls_p50=statistics.median(calls),
               wall_ms_p50=round(statistics.median(walls), 1),
               wall_ms_p95=walls[min(len(walls) - 1, int(0.95 * len(walls)))])
    return out


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="stackroute bench right-call",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--split", choices=sorted(SPLITS), default="test",
                        help="Seal-Tools split (tune on dev only)")
    parser.add_argument("--queries", type=Path, default=None, help="a queries JSONL instead")
    parser.add_argument("--catalog", type=Path, default=SEAL_DIR / "seal-tools.catalog.json")
    parser.add_argument("--engine", default="transformers")
    parser.add_argument("--model", default=None, help="model or preset (default: embedded)")
    parser.add_argument("--limit", type=int, default=40)
    parser.add_argument("--offset", type=int, default=0)
    parser.add_argument("--methods", default="candidates",
                        help="gold-leaf methods, comma-separated: candidates (the product's), "
                             "generate (the whole object, before issue 25), priors (the "
                             "candidates' priors alone, no model call)")
    parser.add_argument("--routing", action="store_true",
                        help="also route from the root with the product router (end to end)")
    parser.add_argument("--no-gold-leaf", action="store_true", help="only the routing mode")
    parser.add_argument("--calibration", default=None,
                        help="routing mode: a calibration file, or 'none' for plain routing "
                             "(default: the one shipped for the model)")
    parser.add_argument("--optional-values", choices=[v.value for v in OptionalValues],
                        default=None, help="which optional properties a call fills, in both "
                        "modes: words | meaning (default: the optional_values setting)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--smoke", action="store_true", help="2 dev queries, gold leaf")
    return parser


def routing_options(model: str, calibration: str | None) -> RouterOptions:
    from stackroute.server.routing.calibration import router_options

    if calibration == "none":
        return router_options(model, policy=Policy.PLAIN)
    return router_options(model, calibration=Path(calibration) if calibration else None)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.smoke:
        args.split, args.limit, args.offset, args.methods = "dev", 2, 0, "candidates"
    unknown = [m for m in args.methods.split(",") if m and m not in METHODS]
    if unknown:
        raise SystemExit(f"unknown method(s) {unknown}; expected some of {sorted(METHODS)}")
    methods = [] if args.no_gold_leaf else [m for m in args.methods.split(",") if m]
    queries_path = args.queries or SEAL_DIR / SPLITS[args.split]
    tree = load_catalog(args.catalog)
    picked = [Query.from_record(r) for r in single_tool_queries(
        queries_path, offset=args.offset, limit=args.limit)]
    started = time.perf_counter()
    engine = create_engine(args.engine, model=args.model)
    load_s = time.perf_counter() - started
    # Gold-leaf: the product's layout (descriptions clipped to fit), the router never asked.
    leaf_machine = build_machine(tree, engine, options=RouterOptions(
        recovery=None, speculation=DraftSource.OFF)) if methods else None
    optional = OptionalValues(args.optional_values or ServerSettings.default("optional_values"))
    meaning = ValueMeaning(default_embedder) if optional is OptionalValues.MEANING else None
    route_options = routing_options(engine.info.model, args.calibration) \
        if args.routing else None
    if route_options is not None:
        route_options = replace(route_options, optional_values=optional)
    route_machine = None
    if route_options is not None:
        embedder = None
        if route_options.recovery is not None:
            from stackroute.server.embeddings.embedder import shared_embedder

            embedder = shared_embedder()
        route_machine = build_machine(tree, engine, options=route_options, embedder=embedder)
    results: list[dict[str, Any]] = []
    manifest: dict[str, Any] = {}
    # what ran, read once before the first request (HEAD may move during a long run)
    provenance = {"commit": subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True,
                                           text=True, check=False, cwd=ROOT).stdout.strip(),
                  "machine": f"{platform.machine()}, {os.cpu_count()} cores"}
    for query in picked:
        row: dict[str, Any] = {"id": query.id}
        if leaf_machine is not None:
            row.update(gold_leaf_row(engine, leaf_machine, tree, query, methods, meaning))
        if route_machine is not None:
            row.update(routing_row(route_machine, tree, query))
        results.append(row)
        manifest = _write(args, engine, load_s, route_options, queries_path, results,
                          [*methods, *(["routing"] if route_machine else [])], provenance)
        print(json.dumps({"id": query.id} | {m: (row[m]["exact"], row[m]["model_calls"])
                                             for m in (*methods, "routing") if m in row}),
              flush=True)
    print(json.dumps(manifest, indent=1))
    return 0


def _write(args: argparse.Namespace, engine: Engine, load_s: float,
           route_options: RouterOptions | None, queries_path: Path,
           results: list[dict[str, Any]], modes: list[str],
           provenance: dict[str, str]) -> dict[str, Any]:
    """The manifest and raw rows so far (a run cut off by its time box keeps them); the load
    beside the run is in the run manifest (`manifest.json`)."""
    manifest: dict[str, Any] = {
        "command": "stackroute bench right-call " + " ".join(
            f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items()
            if v not in (None, False)),
        "commit": provenance["commit"], "engine": args.engine, "model": engine.info.model,
        "load_s": round(load_s, 1), "queries_file": str(queries_path),
        "routing_policy": None if route_options is None else
        ("plain" if route_options.recovery is None else "guided"),
        "calibration": None if route_options is None else route_options.calibration,
        "optional_values": args.optional_values or ServerSettings.default("optional_values"),
        "machine": provenance["machine"],
        "num_queries": len(results), "summary": {m: summarise(results, m) for m in modes}}
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        policy = manifest["routing_policy"] or "gold-leaf"
        stem = f"right-call-{queries_path.stem}-{engine.info.model}-{'+'.join(modes)}-{policy}"
        (args.out / f"{stem}.json").write_text(json.dumps(
            {**manifest, "results": results}, indent=1, ensure_ascii=False) + "\n")
    return manifest


if __name__ == "__main__":
    raise SystemExit(main())
