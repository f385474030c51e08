"""Requests no tool serves: does the router make no call, and what does the check cost on
in-scope requests (issue 25 item 2)?

    stackroute bench out-of-scope --split dev --fit     # fit the check, write the calibration
    stackroute bench out-of-scope --split test          # the rows side by side
        [--model M] [--engine E] [--out DIR] [--smoke] [--no-seal] [--limit N]

The suite is `bench/workloads/out_of_scope.py` (Seal-Tools requests with their tools removed,
chit-chat, other-domain and the overlap suites' out-of-scope requests, beside in-scope ones).
Rows, per split and group, in one process, query by query:
- `router`: the product's guided router without the check (`--no-abstain`);
- `router+abstain`: the same with the check the model's calibration holds (`--abstain`);
- `evidence alone`: the evidence's best leaf, called when it scores at least the
  calibration's `out_of_scope_score` (no model).
Columns: out-of-scope -> no call, tool hallucination (calls made when none should be),
in-scope routing success, model calls, p50/p95 request wall time.

`--fit` (dev only) runs a probe instead: the router with a check that always stops at the
first leaf and records its features (so no arguments are generated), fits the check on them
(`server/tools/abstention_fit.py`: the features chosen by leave-one-out on the dev samples,
unless `--fit-features` names them) and writes it into the model's calibration file; the dev
rows it reports are the fitted check replayed on the probe's features (said so in the JSON).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from stackroute.bench.environment import engine_environment, git_state
from stackroute.bench.experiments.out_of_scope_report import (
    PROBE,
    ROWS,
    replay,
    replay_beside,
    samples,
    table,
    tradeoff,
)
from stackroute.bench.workloads.datasets import SEAL_DIR
from stackroute.bench.workloads.out_of_scope import (
    OUT_OF_SCOPE_TAG,
    Group,
    GroupSplit,
    build_suite,
)
from stackroute.runtime.catalog import build_tree
from stackroute.runtime.errors import InputError
from stackroute.runtime.prompt import PromptStyle
from stackroute.runtime.state import RunState
from stackroute.server.routing.abstention import (
    DETAIL_KEY,
    AbstentionCheck,
    AbstentionOptions,
    read_abstention,
    write_abstention,
)
from stackroute.server.routing.calibration import calibration_file, router_options
from stackroute.server.routing.options import ABSTENTION_MAX_CALL_LOSS, RouterOptions
from stackroute.server.routing.router import build_machine, default_embedder, evidence_for_tree
from stackroute.server.tools.abstention_calibration import evidence_leaf_sample
from stackroute.server.tools.abstention_fit import FEATURES, choose_features, fit_abstention
from stackroute.server.tools.evaluate import Query, run_query, score

log = logging.getLogger(__name__)
AUTO = "auto"  # --fit-features: chosen by leave-one-out on the dev samples


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="stackroute bench out-of-scope", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--split", choices=("dev", "test"), default="test")
    p.add_argument("--fit", action="store_true", help="dev: fit the check and write it")
    p.add_argument("--model", default=None)
    p.add_argument("--engine", default="transformers")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--calibration-out", type=Path, default=None,
                   help="--fit writes here (default: the model's shipped calibration file; "
                        "with --smoke, the out folder)")
    p.add_argument("--calibration", type=Path, default=None,
                   help="route with this calibration file (default: the model's shipped one)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--num-removed", type=int, default=16)
    p.add_argument("--num-seal-in-scope", type=int, default=8)
    p.add_argument("--num-household", type=int, default=10)
    p.add_argument("--num-chatter", type=int, default=12)
    p.add_argument("--num-services", type=int, default=12)
    p.add_argument("--groups", default=None,
                   help="comma-separated groups to run (seal-removed, household, services)")
    p.add_argument("--no-seal", action="store_true", help="skip the Seal-Tools group")
    p.add_argument("--seal-only", action="store_true", help="only the Seal-Tools group")
    p.add_argument("--limit", type=int, default=None, help="queries per group at most")
    p.add_argument("--default-on", action="store_true",
                   help="--fit: routers use the check without --abstain (set it only where "
                        "the test split says the check is worth it)")
    p.add_argument("--max-call-loss", type=float, default=ABSTENTION_MAX_CALL_LOSS,
                   help="--fit: in-scope successes the check may stop on dev (fraction)")
    p.add_argument("--fit-features", default=AUTO,
                   help=f"--fit: the features the check weighs, comma-separated, from "
                        f"{','.join(FEATURES)}; {AUTO} (the default): the subset "
                        f"leave-one-out on the dev samples likes best")
    p.add_argument("--smoke", action="store_true", help="a few household queries only")
    p.add_argument("--refit", type=Path, nargs="+", default=None,
                   help="--fit, or --probe's report, from a saved queries.jsonl instead of "
                        "running it")
    p.add_argument("--probe-only", action="store_true",
                   help="test: the probe alone (each request's first leaf and the check's "
                        "features, no arguments); both rows replayed from it with the "
                        "calibration's check (cheap where a full run is minutes)")
    p.add_argument("--judge-evidence-leaf", action="store_true",
                   help="with --fit or --probe-only: the probe's first leaf is the evidence's "
                   "best leaf, judged with no routing call (what the check sees where the "
                   "router follows its evidence; a 1.5B model's probe fits a CPU's time box)")
    p.add_argument("--probe", action="store_true",
                   help="test: run the router and the probe (no check needed yet); the "
                        "router+abstain row is the calibration's check replayed on the "
                        "probe's first-leaf features beside the measured router row")
    args = p.parse_args(argv)
    if args.fit and args.split != "dev":
        p.error("--fit fits on dev only (--split dev)")
    if args.refit is not None and not (args.fit or args.probe or args.probe_only):
        p.error("--refit goes with --fit, --probe or --probe-only")
    if args.judge_evidence_leaf and not (args.fit or args.probe_only):
        p.error("--judge-evidence-leaf goes with --fit or --probe-only")
    if args.smoke:
        args.no_seal, args.num_household, args.num_chatter = True, 2, 2
        args.num_services = 0
        args.limit = args.limit or 4
    return args


def first_verdict(state: RunState) -> dict[str, Any] | None:
    """The check's record at the run's first leaf (None: the run never reached one)."""
    for event in state.trace:
        record = event.detail.get(DETAIL_KEY) if event.kind.value == "route" else None
        if isinstance(record, dict) and "features" in record:
            return record
    return None


def evidence_alone(evidence: Any, query: Query, threshold: float) -> tuple[str, ...]:
    best, value = evidence.for_request(query.query).best()
    report = evidence.index.report_paths[evidence.index.paths.index(best)]
    return (report,) if value >= threshold else ()


class KnownTexts:
    """An embedder that answers the texts of a catalog already embedded from its cached
    vectors: a catalog with tools removed has the same leaf texts, and embedding Seal-Tools'
    4,076 leaves again costs about 20 CPU minutes."""

    def __init__(self, base: Any, tree: Any) -> None:
        from stackroute.server.embeddings.leaf_index import _depth_first, leaf_text

        self.base = base
        self.model_dir = getattr(base, "model_dir", None)
        self.dim: int = base.dim
        index = evidence_for_tree(tree, base).index  # read back from the cache
        leaves, _ = _depth_first(tree.root)
        self.known = dict(zip((leaf_text(leaf) for leaf in leaves), index.vectors,
                              strict=True))

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        missing = list(dict.fromkeys(t for t in texts if t not in self.known))
        if missing:
            self.known.update(zip(missing, self.base.embed(missing), strict=True))
        return np.stack([self.known[t] for t in texts]).astype(np.float32) if texts \
            else self.base.embed(texts)


def judge_evidence_leaf(check: AbstentionCheck, tree: Any, query: Query) -> dict[str, Any]:
    """The probe's record where the first leaf is the evidence's best (no routing call)."""
    best, sample, usage = evidence_leaf_sample(check, tree, query)
    return {"leaf": best, "fit": check.options.fit(sample.features), "abstain": True,
            "features": sample.features.to_dict(), "model_calls": usage.model_calls}


def run_group(engine: Any, embedder: Any, group: GroupSplit, rows: dict[str, RouterOptions],
              threshold: float, limit: int | None, sink: Any,
              judge_only: AbstentionOptions | None = None) -> list[dict[str, Any]]:
    tree = build_tree(group.catalog)
    style = PromptStyle(max_description_chars=group.description_chars) \
        if group.description_chars else None
    if group.group is Group.SEAL_REMOVED:
        full = json.loads((SEAL_DIR / "seal-tools.catalog.json").read_text(encoding="utf-8"))
        # Leaf scores from the same vectors; the request embedder stays the real one.
        known = KnownTexts(embedder, build_tree(full))
        from stackroute.server.embeddings.leaf_index import EvidenceSource, LeafIndex

        index = LeafIndex.from_tree(tree, known, model_id=_model_id(embedder))
        evidence = EvidenceSource(index, embedder)
    else:
        evidence = evidence_for_tree(tree, embedder)
    machines = {r: build_machine(tree, engine, options=o, evidence=evidence, style=style)
                for r, o in rows.items()} if judge_only is None else {}  # judged, not routed
    check = AbstentionCheck(engine, judge_only, evidence) if judge_only is not None else None
    records = []
    for n, raw in enumerate(group.queries[:limit]):
        query = Query.from_record(raw)
        alone = evidence_alone(evidence, query, threshold)
        records.append(_record(group, "evidence alone", query, alone, {}, 0.0, None))
        if check is not None:
            started = time.perf_counter()
            verdict = judge_evidence_leaf(check, tree, query)
            records.append(_record(group, PROBE, query, (), {
                "model_calls": verdict["model_calls"]},
                (time.perf_counter() - started) * 1000, verdict))
            for r in records[-2:]:
                sink.write(json.dumps(r) + "\n")
            sink.flush()
            continue
        for row, machine in machines.items():
            started = time.perf_counter()
            try:
                state = run_query(machine, query)
            except InputError as e:
                log.warning("%s %s: %s", row, query.id, e)
                records.append(_record(group, row, query, (), {}, 0.0, None, error=str(e)))
                continue
            wall_ms = (time.perf_counter() - started) * 1000
            result = score(tree, query, state, wall_ms=wall_ms)
            records.append(_record(group, row, query, result.called, result.usage, wall_ms,
                                   first_verdict(state)))
        for r in records[-len(machines) - 1:]:
            sink.write(json.dumps(r) + "\n")
        sink.flush()
        log.info("%s %d/%d %s: %s", group.group.value, n + 1, len(group.queries[:limit]),
                 query.id, " ".join(f"{r['row']}={r['called']}" for r in
                                    records[-len(machines) - 1:]))
    return records


def _model_id(embedder: Any) -> str:
    model_dir = getattr(embedder, "model_dir", None)
    return Path(model_dir).name if model_dir is not None else type(embedder).__name__


def _record(group: GroupSplit, row: str, query: Query, called: Sequence[str],
            usage: dict[str, Any], wall_ms: float, verdict: dict[str, Any] | None,
            error: str | None = None) -> dict[str, Any]:
    return {"group": group.group.value, "row": row, "id": query.id, "query": query.query,
            "tags": list(query.tags), "gold": list(query.gold), "called": list(called),
            "success": tuple(called) == query.gold, "model_calls": usage.get("model_calls", 0),
            "wall_ms": round(wall_ms, 1), "verdict": verdict, "error": error}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    from stackroute.server.engines.registry import create_engine

    git = git_state()
    out = args.out or Path("bench/out/out-of-scope") / args.split
    out.mkdir(parents=True, exist_ok=True)
    engine = create_engine(args.engine, model=args.model)
    model = engine.info.model
    base = router_options(model, abstain=False, calibration=args.calibration)
    if base.recovery is None:
        raise SystemExit(f"no calibration for {model}: the check needs the guided policy")
    rows: dict[str, RouterOptions]
    probe = AbstentionOptions(threshold=math.inf)  # always stop: record, no arguments
    if args.fit:
        rows = {PROBE: replace(base, abstention=probe)}
    elif args.probe:
        rows = {ROWS[0]: base, PROBE: replace(base, abstention=probe)}
    elif args.probe_only:
        rows = {PROBE: replace(base, abstention=probe)}
    else:
        fitted = router_options(model, abstain=True, calibration=args.calibration).abstention
        if fitted is None:
            raise SystemExit(f"the calibration for {model} has no abstention check: run "
                             "--split dev --fit first")
        rows = {ROWS[0]: base, ROWS[1]: replace(base, abstention=fitted)}
    suite = build_suite(args.split, seed=args.seed,
                        num_removed=0 if args.no_seal else args.num_removed,
                        num_seal_in_scope=0 if args.no_seal else args.num_seal_in_scope,
                        num_household=args.num_household, num_chatter=args.num_chatter,
                        num_services=args.num_services)
    embedder = default_embedder() if args.refit is None else None
    threshold = base.recovery.out_of_scope_score
    started = time.time()
    records: list[dict[str, Any]] = []
    if args.refit is not None:
        records = [json.loads(line) for path in args.refit for line in
                   path.read_text(encoding="utf-8").splitlines() if line.strip()]
    else:
        with open(out / "queries.jsonl", "w", encoding="utf-8") as sink:
            for group in suite.groups:
                if args.seal_only and group.group is not Group.SEAL_REMOVED:
                    continue
                if args.groups and group.group.value not in args.groups.split(","):
                    continue
                records += run_group(engine, embedder, group, rows, threshold, args.limit,
                                     sink, probe if args.judge_evidence_leaf else None)
    result: dict[str, Any] = {
        "split": args.split, "seed": args.seed, "suite": suite.stem,
        "groups": {g.group.value: g.metadata for g in suite.groups},
        "environment": engine_environment(engine, git=git), "elapsed_s": time.time() - started,
        "rows": table(records)}
    if args.fit:
        target = args.calibration_out or (out / "calibration.json" if args.smoke
                                          else calibration_file(model))
        num_in_scope = sum(OUT_OF_SCOPE_TAG not in r["tags"] for r in records
                           if r["row"] == PROBE)
        dev = samples(records)
        choice: list[dict[str, Any]] = []
        if args.fit_features == AUTO:
            features, ranked = choose_features(dev, max_call_loss=args.max_call_loss,
                                               num_in_scope=num_in_scope)
            choice = [asdict(r) for r in ranked]
        else:
            features = tuple(args.fit_features.split(","))
        fit = fit_abstention(dev, max_call_loss=args.max_call_loss,
                             num_in_scope=num_in_scope, features=features)
        measured = {**fit.measured, "suite": suite.stem, "num_in_scope": num_in_scope,
                    "commit": git.get("commit"), "chosen_by": args.fit_features}
        if target != calibration_file(model) and not target.exists():
            target.write_text(calibration_file(model).read_text(encoding="utf-8"),
                              encoding="utf-8")
        write_abstention(target, fit.options, measured, is_default=args.default_on)
        result.update(fitted=fit.options.to_dict(), fit_measured=measured,
                      feature_choice=choice,
                      calibration=str(target), replayed=replay(records, fit.options),
                      tradeoff=tradeoff(dev, fit.options))
        check = read_abstention(target)
        if check is None or check.options != fit.options:
            raise SystemExit(f"{target}: the written check does not read back")
    if args.probe_only and not args.fit:
        frozen = router_options(model, abstain=True, calibration=args.calibration).abstention
        if frozen is None:
            raise SystemExit(f"the calibration for {model} has no abstention check yet")
        result.update(check=frozen.to_dict(), replayed=replay(records, frozen))
    if args.probe and args.refit is not None:
        fitted = router_options(model, abstain=True, calibration=args.calibration).abstention
        if fitted is None:
            raise SystemExit(f"the calibration for {model} has no abstention check yet")
        result.update(check=fitted.to_dict(), replayed=replay_beside(records, fitted))
    (out / "results.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({"rows": result["rows"], "replayed": result.get("replayed")}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
