"""Arguments given the right leaf (issue 25): for single-tool queries with gold arguments, the
run starts at the gold leaf's parent, the leaf is taken as chosen, and its arguments are made
two ways side by side in one process: `generate` (the JSON schema constraint over the whole
object, the router's behaviour before issue 25) and `candidates` (routing/arguments: one
constrained choice per value over the request's candidates). Reports exact-argument success
(every argument equal after schema coercion, no extra field), Seal-Tools' parameter
precision / recall / F1, model calls and wall time per query.

    python -m stackroute.bench.right_call_args --queries Q.jsonl --catalog C.json \
        [--model qwen2.5-coder-1.5b] [--limit 40] [--offset 0] --out DIR
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from stackroute.runtime.catalog import load_catalog
from stackroute.server.engines.base import Constraint, Engine, SamplingOptions
from stackroute.server.engines.registry import create_engine
from stackroute.server.routing.arguments import ArgumentFiller
from stackroute.server.routing.leaf_arguments import json_object
from stackroute.server.routing.options import DraftSource, RouterOptions
from stackroute.server.routing.router import build_machine
from stackroute.server.tools.evaluate import ParamCounts, Query, arguments_equal, param_counts


def _generate(engine: Engine, request: Any, leaf: Any) -> tuple[dict[str, Any], int]:
    prompt = request.arguments_prompt(leaf)
    schema = leaf.parameters or {"type": "object", "properties": {}}
    generation = engine.generate(prompt, constraint=Constraint.json(schema),
                                 sampling=SamplingOptions(max_tokens=384))
    return json_object(generation.text) or {}, generation.usage.model_calls


def _candidates(engine: Engine, request: Any, leaf: Any) -> tuple[dict[str, Any], int]:
    filled = ArgumentFiller(engine).fill(request, leaf)
    return json_object(filled.text) or {}, filled.usage.model_calls


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--queries", required=True)
    parser.add_argument("--catalog", required=True)
    parser.add_argument("--model", default=None)
    parser.add_argument("--limit", type=int, default=40)
    parser.add_argument("--offset", type=int, default=0)
    parser.add_argument("--out", required=True)
    parser.add_argument("--methods", default="generate,candidates",
                        help="comma-separated: generate (the whole object under the schema, "
                             "slow: its grammar compiles per leaf) and/or candidates")
    args = parser.parse_args()
    tree = load_catalog(args.catalog)
    rows = [json.loads(line) for line in Path(args.queries).read_text().splitlines() if line]
    single = [r for r in rows if len(r.get("gold", [])) == 1 and r.get("args")]
    picked = single[args.offset:args.offset + args.limit]
    started = time.perf_counter()
    engine = create_engine("transformers", model=args.model)
    load_s = time.perf_counter() - started
    # The product's layout (descriptions clipped to fit the context, menu_fit.py); the router
    # itself is never asked: the leaf is the gold one.
    machine = build_machine(tree, engine, options=RouterOptions(
        recovery=None, speculation=DraftSource.OFF))
    known = {"generate": _generate, "candidates": _candidates}
    methods = {m: known[m] for m in args.methods.split(",")}
    results: list[dict[str, Any]] = []
    for row in picked:
        query = Query.from_record(row)
        leaf = tree.get(query.gold[0])
        assert leaf is not None, query.gold[0]
        parent = "/".join(query.gold[0].split("/")[:-1])
        state = machine.start(query.query, run_id=query.id, at=parent)
        request = machine.request_for(state)
        out: dict[str, Any] = {"id": query.id, "query": query.query, "gold": query.args[0]
                               if query.args else {}}
        for name, method in methods.items():
            t0 = time.perf_counter()
            predicted, calls = method(engine, request, leaf)
            wall_ms = (time.perf_counter() - t0) * 1000
            counts = param_counts(tree, query, query.gold, (predicted,))
            out[name] = {"arguments": predicted, "model_calls": calls,
                         "wall_ms": round(wall_ms, 1), "params": counts.to_dict(),
                         "exact": arguments_equal(predicted, out["gold"], leaf.parameters)}
        results.append(out)
        _write(args, engine, load_s, results, list(methods))
        print(json.dumps({k: out[k] for k in ("id",)} | {
            m: (out[m]["exact"], out[m]["model_calls"]) for m in methods}), flush=True)
    print(json.dumps(_write(args, engine, load_s, results, list(methods)), indent=1))


def _write(args: argparse.Namespace, engine: Engine, load_s: float,
           results: list[dict[str, Any]], methods: list[str]) -> dict[str, Any]:
    """Write the manifest and raw rows so far (a run cut off by its time box keeps them)."""
    summary: dict[str, Any] = {}
    for name in methods:
        counts = sum((ParamCounts(**r[name]["params"]) for r in results), ParamCounts())
        walls = sorted(r[name]["wall_ms"] for r in results)
        summary[name] = {"exact": sum(r[name]["exact"] for r in results) / max(len(results), 1),
                         **counts.prf(),
                         "model_calls_mean": statistics.fmean(
                             r[name]["model_calls"] for r in results) if results else 0.0,
                         "wall_ms_p50": statistics.median(walls) if walls else 0.0,
                         "wall_ms_p95": walls[min(len(walls) - 1, int(0.95 * len(walls)))]
                         if walls else 0.0}
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=False).stdout.strip()
    manifest = {"command": "python -m stackroute.bench.right_call_args " + " ".join(
        f"--{k} {v}" for k, v in vars(args).items() if v is not None),
        "commit": commit, "model": engine.info.model, "load_s": round(load_s, 1),
        "machine": f"{platform.machine()} 2-core shared VM, 8 helpers busy beside it",
        "num_queries": len(results), "summary": summary}
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"args-{Path(args.queries).stem}-{engine.info.model}-{'+'.join(methods)}"
    (out_dir / f"{stem}.json").write_text(json.dumps({**manifest, "results": results},
                                                     indent=1, ensure_ascii=False) + "\n")
    return manifest


if __name__ == "__main__":
    main()
