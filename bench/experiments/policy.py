"""The routing policies side by side (issue 14's table): the paper's flat baseline and plain
hierarchy, the guided policy users get by default, and the evidence it uses on its own.

    stackroute bench policy [--sizes 16 32 64] [--limit 24]
        [--seal 100] [--out bench/out/policy] [--smoke]

Rows, one model (the engine's) and one process:
- `flat`: every leaf in one menu, the model's choice alone (the paper's baseline);
- `plain`: the hierarchy, the model's choice alone (the paper);
- `guided`: what `stackroute run` does by default (`router_options` for the model: the
  calibration's evidence prior and recovery, the finish rule);
- `evidence alone`: the best leaf by the very evidence `guided` uses, called when it scores at
  least the calibration's `out_of_scope_score` (no model);
- `MiniLM alone`: the floor before the lexical evidence: cosine on the leaf's name and
  description only, called when it reaches the old calibration's 0.288.
Suites: semantic-overlap 16/32/64, noisy-two-step and clean-semantic at 32 (report seed 0; the
calibration used seed 1), Seal-Tools `test` and `test-ood` single-tool queries (the tree
catalog, descriptions cut to 120 characters so the 146-option root menu fits the context;
flat cannot fit 4,076 leaves and is skipped there). Queries run one at a time through every
row (query-major). Writes `results.json` and `queries.jsonl` under `--out`, prints the table.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from stackroute.bench.engines import add_engine_options, engine_from_args
from stackroute.bench.environment import engine_environment, git_state
from stackroute.bench.experiments.overturned import Paths, overturned
from stackroute.bench.experiments.robust import Outcome, run_one
from stackroute.bench.workloads.datasets import (
    SEAL_DESCRIPTION_CHARS,
    SEAL_DIR,
    Dataset,
    generated_dataset,
    seal_queries,
)
from stackroute.runtime.catalog import load_catalog
from stackroute.runtime.prompt import PromptStyle
from stackroute.server.embeddings.leaf_index import EvidenceSource
from stackroute.server.embeddings.words import name_words
from stackroute.server.routing.calibration import router_options
from stackroute.server.routing.options import DraftSource, Policy, RouterOptions
from stackroute.server.routing.router import build_machine, evidence_for_tree
from stackroute.server.tools.evaluate import EvalSummary, Query, QueryResult

log = logging.getLogger(__name__)

REPORT_SEED = 0
MODEL_ROWS = ("flat", "plain", "guided")
EVIDENCE_ROWS = ("evidence alone", "MiniLM alone")


def suites(sizes: Sequence[int], *, limit: int, seal: int) -> list[Dataset]:
    out = [generated_dataset("semantic-overlap", size, seed=REPORT_SEED, limit=limit)
           for size in sizes]
    out += [generated_dataset(suite, 32, seed=REPORT_SEED, limit=limit)
            for suite in ("noisy-two-step", "clean-semantic")]
    if seal and (SEAL_DIR / "test.queries.jsonl").is_file():
        tree = load_catalog(SEAL_DIR / "seal-tools.catalog.json")
        style = PromptStyle(max_description_chars=SEAL_DESCRIPTION_CHARS)
        for split in ("test", "test-ood"):
            queries = seal_queries(SEAL_DIR / f"{split}.queries.jsonl", single=seal, multi=0)
            out.append(Dataset(f"seal-tools-{split}", tree, queries, style))
    return out


MINILM_OUT_OF_SCOPE = 0.288  # the calibration's threshold for MiniLM alone


class MiniLmAlone:
    """Cosine between the request and `name words: description`, nothing else."""

    def __init__(self, tree: Any, embedder: Any) -> None:
        from stackroute.server.embeddings.leaf_index import _depth_first, _report_path

        leaves, _ = _depth_first(tree.root)
        texts = []
        for leaf in leaves:
            words = name_words(leaf.name)
            description = " ".join(leaf.description.split())
            texts.append(f"{words}: {description}" if description else words)
        self.paths = [_report_path(leaf) for leaf in leaves]
        self.vectors = embedder.embed(texts)
        self.embedder = embedder

    def is_right(self, query: Query) -> bool:
        scores = self.vectors @ self.embedder.embed([query.query])[0]
        best = int(scores.argmax())
        called = (self.paths[best],) if scores[best] >= MINILM_OUT_OF_SCOPE else ()
        return called == query.gold


def evidence_alone(evidence: EvidenceSource, query: Query, threshold: float) -> Paths:
    """What the evidence alone calls: its best leaf where it scores at least `threshold`."""
    best, score = evidence.for_request(query.query).best()
    report = evidence.index.report_paths[evidence.index.paths.index(best)]
    return (report,) if score >= threshold else ()


def summarize(outcomes: Sequence[Outcome], queries: Sequence[Query]) -> dict[str, Any]:
    summary = EvalSummary(results=[o.result for o in outcomes]).to_dict()
    out_of_scope = [o.result.is_success for o, q in zip(outcomes, queries, strict=True)
                    if "out-of-scope" in q.tags]
    walls = [o.wall_ms for o in outcomes]
    calls = [o.result.usage.get("model_calls", 0) for o in outcomes]
    single = [o.result.usage.get("model_calls", 0) for o, q in zip(outcomes, queries,
                                                                   strict=True)
              if len(q.gold) == 1]
    return {"success": summary["success"], "args_success": summary["args_success"],
            "out_of_scope_done": sum(out_of_scope) / len(out_of_scope) if out_of_scope
            else None,
            "model_calls_mean": statistics.fmean(calls) if calls else 0.0,
            "model_calls_single_p50": statistics.median(single) if single else None,
            "model_calls_single_p95": _p95(single) if single else None,
            "prefill_tokens_mean": summary["prefill_tokens_mean"],
            "wall_ms_p50": statistics.median(walls) if walls else 0.0,
            "errors": sum(o.result.outcome == "error" for o in outcomes)}


def _p95(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def run_dataset(engine: Any, embedder: Any, data: Dataset, guided: RouterOptions,
                out_queries: Any, *, max_argument_tokens: int, flat_limit: int,
                model_rows: Sequence[str] = MODEL_ROWS) -> dict[str, Any]:
    evidence = evidence_for_tree(data.tree, embedder)
    minilm = MiniLmAlone(data.tree, embedder)
    is_seal = data.name.startswith("seal-tools")
    rows = [r for r in model_rows if not (is_seal and r == "flat")]
    plain = RouterOptions(recovery=None, speculation=DraftSource.OFF,
                          max_argument_tokens=max_argument_tokens)
    # guided: the product's options for the model (its calibration's argument values,
    # shortlists, ...), step by step so that every decision is the model's own
    options = {"flat": plain, "plain": plain,
               "guided": replace(guided, speculation=DraftSource.OFF,
                                 max_argument_tokens=max_argument_tokens)}
    machines = {r: build_machine(data.tree, engine, is_flat=r == "flat", options=options[r],
                                 evidence=None if r == "flat" else evidence, style=data.style)
                for r in rows}
    threshold = guided.recovery.out_of_scope_score if guided.recovery else 0.0
    outcomes: dict[str, list[Outcome]] = {r: [] for r in rows}
    alone: list[Paths] = []
    floor: list[bool] = []
    flat_queries = data.queries[:flat_limit]
    for n, query in enumerate(data.queries, 1):
        alone.append(evidence_alone(evidence, query, threshold))
        floor.append(minilm.is_right(query))
        for r in rows:
            if r == "flat" and n > flat_limit:
                continue
            outcome = run_one(machines[r], data.tree, query)
            outcomes[r].append(outcome)
            out_queries.write(json.dumps({"dataset": data.name, "row": r,
                                          **outcome.result.to_dict(),
                                          "wall_ms": round(outcome.wall_ms, 1)}) + "\n")
            out_queries.flush()
        log.info("%s %d/%d: %s evidence=%d", data.name, n, len(data.queries),
                 " ".join(f"{r}={int(outcomes[r][-1].result.is_success)}" for r in rows),
                 alone[-1] == query.gold)
    table = {r: summarize(outcomes[r], flat_queries if r == "flat" else data.queries)
             for r in rows}
    evidence_right = [a == q.gold for a, q in zip(alone, data.queries, strict=True)]
    for r, right in zip(EVIDENCE_ROWS, (evidence_right, floor), strict=True):
        table[r] = {"success": sum(right) / max(len(right), 1), "model_calls_mean": 0.0}
    against = {r: overturned((q.id, a, o.result.called, q.gold) for q, a, o in zip(
        data.queries, alone, outcomes[r], strict=True)).to_dict()
        for r in rows if r == "guided"}
    return {"num_queries": len(data.queries), "num_flat_queries": len(flat_queries),
            "rows": table, "overturned": against}


def summarize_file(out: Path) -> dict[str, Any]:
    """The model rows rebuilt from `queries.jsonl` (a run cut short keeps what it finished),
    merged with `results.json`'s evidence rows and the evidence-only run's, if any."""
    rows: dict[str, dict[str, list[tuple[Outcome, Query]]]] = {}
    for line in (out / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        result = QueryResult(id=record["id"], tags=tuple(record["tags"]),
                             gold=tuple(record["gold"]), called=tuple(record["called"]),
                             is_success=record["success"],
                             is_args_success=record["args_success"],
                             outcome=record["outcome"], usage=record["usage"],
                             format_failures=record["format_failures"],
                             error=record.get("error"))
        query = Query(id=record["id"], query="", gold=tuple(record["gold"]), args=None,
                      tags=tuple(record["tags"]))
        rows.setdefault(record["dataset"], {}).setdefault(record["row"], []).append(
            (Outcome(result, record["wall_ms"], {}), query))
    results: dict[str, Any] = {"suites": {}}
    for path in (out / "results.json", out / "evidence.json"):
        if path.is_file():
            saved = json.loads(path.read_text(encoding="utf-8"))
            for name, data in saved.get("suites", {}).items():
                suite = results["suites"].setdefault(name, {"rows": {}})
                for row in EVIDENCE_ROWS:
                    if row in data["rows"]:
                        suite["rows"][row] = data["rows"][row]
    for name, by_row in rows.items():
        suite = results["suites"].setdefault(name, {"rows": {}})
        model = {row: summarize([o for o, _ in pairs], [q for _, q in pairs])
                 for row, pairs in by_row.items()}
        for row, summary in model.items():
            summary["num_queries"] = len(by_row[row])
        suite["rows"] = {**model, **suite["rows"]}
    return results


def print_table(results: dict[str, Any]) -> None:
    head = (f"{'suite':<26}{'row':<16}{'success':>8}{'args':>7}{'oos':>6}{'calls':>7}"
            f"{'1-tool p50/p95':>16}{'prefill':>9}{'p50 ms':>9}")
    print(head)
    for name, data in results["suites"].items():
        for row, s in data["rows"].items():
            def num(key: str, fmt: str, s: dict[str, Any] = s) -> str:
                value = s.get(key)
                return "-" if value is None else format(value, fmt)
            single = "-" if s.get("model_calls_single_p50") is None else \
                f"{s['model_calls_single_p50']:g}/{s['model_calls_single_p95']:g}"
            print(f"{name:<26}{row:<16}{num('success', '.3f'):>8}"
                  f"{num('args_success', '.3f'):>7}{num('out_of_scope_done', '.2f'):>6}"
                  f"{num('model_calls_mean', '.2f'):>7}{single:>16}"
                  f"{num('prefill_tokens_mean', '.0f'):>9}{num('wall_ms_p50', '.0f'):>9}")
        for row, against in data.get("overturned", {}).items():
            print(f"{name:<26}{row} overturned the evidence on {against['overturned']} of "
                  f"{against['num_queries']}: right {against['right']}, wrong "
                  f"{against['wrong']} (results.json lists them)")


def evidence_only(args: argparse.Namespace, guided: RouterOptions) -> int:
    from stackroute.server.embeddings.embedder import shared_embedder

    embedder = shared_embedder()
    threshold = guided.recovery.out_of_scope_score if guided.recovery else 0.0
    results: dict[str, Any] = {"suites": {}}
    data_sets = suites(args.sizes, limit=args.limit, seal=args.seal)
    if args.only:
        data_sets = [d for d in data_sets if d.name in args.only]
    for data in data_sets:
        evidence = evidence_for_tree(data.tree, embedder)
        minilm = MiniLmAlone(data.tree, embedder)
        alone = [evidence_alone(evidence, q, threshold) == q.gold for q in data.queries]
        floor = [minilm.is_right(q) for q in data.queries]
        results["suites"][data.name] = {"num_queries": len(data.queries), "rows": {
            row: {"success": sum(right) / max(len(right), 1), "model_calls_mean": 0.0}
            for row, right in zip(EVIDENCE_ROWS, (alone, floor), strict=True)}}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "evidence.json").write_text(json.dumps(results, indent=2) + "\n")
    print_table(results)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stackroute bench policy",
                                     description=__doc__.split("\n\n")[0])
    add_engine_options(parser)
    parser.add_argument("--sizes", type=int, nargs="+", default=[16, 32, 64])
    parser.add_argument("--limit", type=int, default=24, help="queries per generated suite")
    parser.add_argument("--seal", type=int, default=100,
                        help="single-tool queries per Seal-Tools split (0: none)")
    parser.add_argument("--flat-limit", type=int, default=6,
                        help="queries per suite through the flat row (its cold prefill of "
                        "every leaf costs 30-100 s a query on CPU)")
    parser.add_argument("--max-argument-tokens", type=int, default=384,
                        help="the product's default cap")
    parser.add_argument("--calibration", type=Path, default=None,
                        help="the guided row's calibration file (default: the model's shipped)")
    parser.add_argument("--out", type=Path, default=Path("bench/out/policy"))
    parser.add_argument("--rows", nargs="*", default=list(MODEL_ROWS),
                        help="model rows to run (plain on Seal-Tools loops on DONE/BACK for "
                        "minutes a query)")
    parser.add_argument("--only", nargs="*", default=None,
                        help="run only these suites (names as in the table)")
    parser.add_argument("--smoke", action="store_true",
                        help="3 queries of overlap-16 only (1 through the flat row)")
    parser.add_argument("--summarize", action="store_true",
                        help="print the table from --out's queries.jsonl (no model)")
    parser.add_argument("--evidence-only", action="store_true",
                        help="only the evidence rows (no model): writes evidence.json")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    if args.summarize:
        summary = summarize_file(args.out)
        (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        print_table(summary)
        return 0
    if args.smoke:
        args.sizes, args.limit, args.seal = [16], 3, 0
        args.flat_limit = min(args.flat_limit, 1)
    from stackroute.server.embeddings.embedder import shared_embedder

    started = time.time()
    git = git_state()
    engine = engine_from_args(args)
    guided = router_options(engine.info.model, policy=Policy.GUIDED,
                            calibration=args.calibration)
    if args.evidence_only:
        return evidence_only(args, guided)
    embedder = shared_embedder()
    args.out.mkdir(parents=True, exist_ok=True)
    data_sets = suites(args.sizes, limit=args.limit, seal=args.seal)
    if args.smoke:
        data_sets = data_sets[:1]
    if args.only:
        data_sets = [d for d in data_sets if d.name in args.only]
    results: dict[str, Any] = {"environment": engine_environment(engine, git=git),
                               "command": " ".join(["stackroute bench policy", *(argv or [])]),
                               "guided": replace(guided, speculation=DraftSource.OFF).describe(),
                               "guided_options": guided.recovery.to_dict()
                               if guided.recovery else None, "suites": {}}
    with open(args.out / "queries.jsonl", "w", encoding="utf-8") as out_queries:
        for data in data_sets:
            results["suites"][data.name] = run_dataset(
                engine, embedder, data, guided, out_queries,
                max_argument_tokens=args.max_argument_tokens, flat_limit=args.flat_limit,
                model_rows=args.rows)
            (args.out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    results["seconds"] = round(time.time() - started, 1)
    (args.out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    print_table(results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
