"""Argument accuracy by precision: does bfloat16 write arguments as well as float32?

Routing decisions agree between the two precisions (`stackroute bench peers` with
`ours@bfloat16`: 32/32), but greedy argument text can differ, so this compares them against
gold: for each single-tool query of the Seal-Tools dev split and of the cache suite's 16-tool
catalog, the gold leaf's arguments are generated under its schema by the embedded engine at
each precision (one process, one thread, the precisions alternating per query) and compared
with the gold arguments as `stackroute eval` scores them (`arguments_equal`).

    stackroute bench precision-args --queries 40 \
        --out bench/results/<date>-cpu-precision-args
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stackroute.bench.engines import add_engine_options, build_engine, needs_transformers
from stackroute.bench.environment import environment
from stackroute.bench.workloads.datasets import SEAL_DIR, seal_queries
from stackroute.bench.workloads.generate import generate_suite
from stackroute.runtime.catalog import build_tree, load_catalog
from stackroute.runtime.messages import Message
from stackroute.runtime.prompt import Prompt, PromptLayout
from stackroute.runtime.tree import CapabilityTree
from stackroute.server.engines.base import Constraint, SamplingOptions
from stackroute.server.engines.transformers_engine import TransformersEngine
from stackroute.server.tools.evaluate import arguments_equal

SYSTEM = "You fill in tool arguments as JSON."
PRECISIONS = ("float32", "bfloat16")
MAX_TOKENS = 384  # the router's argument budget


@dataclass(frozen=True)
class Case:
    source: str
    query_id: str
    prompt: Prompt
    schema: Mapping[str, Any]
    gold: Mapping[str, Any]


def cases_from(source: str, tree: CapabilityTree, queries: Sequence[Any]) -> list[Case]:
    layout = PromptLayout(tree)
    out = []
    for q in queries:
        leaf = tree.node(tuple(q["gold"][0].split("/")))
        out.append(Case(source, q["id"], Prompt((Message("system", SYSTEM),
                                                 layout.arguments_request(leaf, q["query"]))),
                        leaf.parameters or {"type": "object", "properties": {}},
                        q["args"][0]))
    return out


def workload(num_queries: int) -> list[Case]:
    seal = load_catalog(SEAL_DIR / "seal-tools.catalog.json")
    seal_q = [{"id": q.id, "query": q.query, "gold": q.gold, "args": q.args}
              for q in seal_queries(SEAL_DIR / "dev.queries.jsonl", single=num_queries,
                                    multi=0)]
    generated = generate_suite("scale-up", num_leaves=16, seed=0)
    suite_q = [q for q in generated.queries if len(q["gold"]) == 1][:num_queries]
    return [*cases_from("seal-tools-dev", seal, seal_q),
            *cases_from("scale-up-16", build_tree(generated.catalog), suite_q)]


def run(engines: Mapping[str, TransformersEngine], cases: Sequence[Case],
        ) -> list[dict[str, Any]]:
    rows = []
    for k, case in enumerate(cases):
        order = list(engines) if k % 2 == 0 else list(engines)[::-1]
        for precision in order:
            gen = engines[precision].generate(case.prompt, constraint=Constraint.json(
                dict(case.schema)), sampling=SamplingOptions(max_tokens=MAX_TOKENS))
            try:
                answer = json.loads(gen.text)
            except ValueError:
                answer = None
            rows.append({"source": case.source, "query_id": case.query_id,
                         "precision": precision, "text": gen.text,
                         "correct": isinstance(answer, dict)
                         and arguments_equal(answer, case.gold, case.schema),
                         "latency_ms": gen.usage.latency_ms,
                         "forward_passes": gen.usage.forward_passes,
                         "finish_reason": gen.finish_reason})
    return rows


def summarize(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for source in sorted({r["source"] for r in rows}):
        mine = [r for r in rows if r["source"] == source]
        per = {p: [r for r in mine if r["precision"] == p] for p in PRECISIONS}
        texts = {p: {r["query_id"]: r["text"] for r in per[p]} for p in PRECISIONS}
        out[source] = {
            "cases": len(per[PRECISIONS[0]]),
            "same_text": sum(texts[PRECISIONS[0]][q] == texts[PRECISIONS[1]].get(q)
                             for q in texts[PRECISIONS[0]]),
            **{f"{p}_correct": sum(r["correct"] for r in per[p]) for p in PRECISIONS},
            **{f"{p}_latency_ms_p50": statistics.median(r["latency_ms"] for r in per[p])
               for p in PRECISIONS},
            **{f"{p}_at_cap": sum(r["finish_reason"] == "length" for r in per[p])
               for p in PRECISIONS}}
    return out


TRANSFORMERS_ONLY = "one engine per dtype"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stackroute bench precision-args",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=int, default=40, help="single-tool queries per source")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--smoke", action="store_true", help="2 queries per source")
    add_engine_options(parser, transformers_only=TRANSFORMERS_ONLY)
    args = parser.parse_args(argv)
    needs_transformers(args.engine, "precision-args", TRANSFORMERS_ONLY)
    if args.smoke:
        args.queries = 2
    env = environment()
    engines = {p: build_engine("transformers", args.model, dtype=p, num_threads=args.threads)
               for p in PRECISIONS}
    cases = workload(args.queries)
    for engine in engines.values():  # first-call costs out of the timings
        engine.generate(cases[0].prompt, sampling=SamplingOptions(max_tokens=2))
    rows = run(engines, cases)
    summary = {"sources": summarize(rows), "environment": env, "threads": args.threads}
    print(json.dumps(summary["sources"], indent=1))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
        (args.out / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
