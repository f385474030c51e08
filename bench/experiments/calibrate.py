"""Calibrate the guided policy of one model on the benchmark's dev splits, and record it.

    stackroute bench calibrate [--model PATH] [--sizes 16 32 64] \
        [--seal-single 12]

Dev data only: the semantic-overlap suite generated with seed 1 (the benchmark reports seed 0)
and Seal-Tools `dev.queries.jsonl` after the first `--seal-offset` queries of each kind (the
benchmark uses those). The measuring is the product's (`stackroute.server.tools.calibrate`,
what `stackroute calibrate` runs on one catalog); this script only builds the suites:
- the model's menus: semantic-overlap at each size and the first `--seal-single` single-tool
  (and `--seal-multi` multi-tool) Seal-Tools dev queries;
- the model-free thresholds: the same generated suites, `--done-queries` single- and
  multi-tool Seal-Tools dev queries, and noisy-two-step (asks among distractor sentences).

Writes `server/routing/calibrations/<model>.json` (package data, what routers load) unless
`--out`, and with `--records` every decision as JSONL.
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
from collections.abc import Sequence
from pathlib import Path

from stackroute.bench.engines import add_engine_options, engine_from_args
from stackroute.bench.workloads.datasets import Dataset, generated_dataset, seal_dataset
from stackroute.server.routing.calibration import calibration_file
from stackroute.server.routing.router import evidence_for_tree
from stackroute.server.tools.calibrate import Calibration, calibrate, calibrate_thresholds

log = logging.getLogger(__name__)

DEV_SEED = 1


def dev_sets(sizes: Sequence[int], *, seal_single: int, seal_multi: int,
             max_queries: int, seal_offset: int = 0) -> list[Dataset]:
    """What the model is asked: the generated suites and Seal-Tools dev queries."""
    sets = [generated_dataset("semantic-overlap", size, seed=DEV_SEED, limit=max_queries)
            for size in sizes]
    if seal_single or seal_multi:
        sets.append(seal_dataset(single=seal_single, multi=seal_multi, offset=seal_offset))
    return sets


def threshold_sets(generated: Sequence[Dataset], *, max_queries: int, seal_offset: int,
                   done_queries: int) -> list[Dataset]:
    """What the thresholds are measured on (no model): more Seal-Tools dev queries, multi-tool
    ones included, and noisy-two-step."""
    return [*generated,
            seal_dataset(single=done_queries, multi=done_queries, offset=seal_offset),
            generated_dataset("noisy-two-step", 32, seed=DEV_SEED, limit=max_queries)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stackroute bench calibrate",
                                     description=(__doc__ or "").split("\n\n")[0])
    add_engine_options(parser)
    parser.add_argument("--sizes", type=int, nargs="*", default=[16, 32, 64])
    parser.add_argument("--max-queries", type=int, default=24, help="per generated suite")
    parser.add_argument("--seal-single", type=int, default=12)
    parser.add_argument("--seal-multi", type=int, default=0)
    parser.add_argument("--seal-offset", type=int, default=100,
                        help="skip this many of each kind (the benchmark uses the first ones)")
    parser.add_argument("--done-queries", type=int, default=100,
                        help="single- and multi-tool dev queries for the thresholds (no model)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (1 is fastest on a shared 2-core machine)")
    parser.add_argument("--out", type=Path, default=None, help="calibration JSON path")
    parser.add_argument("--records", type=Path, default=None, help="write decisions as JSONL")
    parser.add_argument("--thresholds-only", action="store_true",
                        help="recompute the model-free thresholds for the current evidence "
                        "and keep the calibrated weights (no model calls)")
    parser.add_argument("--smoke", action="store_true",
                        help="overlap-16, 2 queries per set, written to a temporary file "
                             "unless --out (never over the shipped calibration)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.sizes, args.max_queries, args.seal_single, args.seal_multi = [16], 2, 2, 0
        args.done_queries = 10
        if args.out is None:
            args.out = Path(tempfile.mkdtemp(prefix="calibrate-smoke-")) / "calibration.json"
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    model_sets = dev_sets(args.sizes, seal_single=args.seal_single, seal_multi=args.seal_multi,
                          max_queries=args.max_queries, seal_offset=args.seal_offset)
    generated = [d for d in model_sets if d.name.startswith("semantic-overlap")]
    score_sets = threshold_sets(generated, max_queries=args.max_queries,
                                seal_offset=args.seal_offset, done_queries=args.done_queries)
    from stackroute.server.embeddings.embedder import shared_embedder

    embedder = shared_embedder()
    # one catalog per name: the Seal-Tools sets of both lists share theirs
    trees = {d.name: d.tree for d in (*model_sets, *score_sets)}
    evidence = {name: evidence_for_tree(tree, embedder) for name, tree in trees.items()}
    result: Calibration
    if args.thresholds_only:
        from stackroute.server.engines.model_store import DEFAULT_GGUF_FILENAME

        model = args.model or DEFAULT_GGUF_FILENAME.removesuffix(".gguf")
        out = args.out or calibration_file(model)
        result = calibrate_thresholds(model, evidence, score_sets,
                                      keep=out if out.is_file() else None)
    else:
        engine = engine_from_args(args, num_threads=args.threads)
        for dev in model_sets:
            log.info("collecting %s: %d queries", dev.name, len(dev.queries))
        result = calibrate(engine, evidence, model_sets, threshold_sets=score_sets)
        result.measured.update(seal_offset=args.seal_offset, dev_seed=DEV_SEED)
        out = args.out or calibration_file(engine.info.model)
        if args.records is not None:
            args.records.parent.mkdir(parents=True, exist_ok=True)
            args.records.write_text("".join(json.dumps(r.to_dict()) + "\n"
                                            for r in result.records))
    result.write(out)
    shown = ("model_alone", "chosen", "evidence_alone", "thresholds", "confidence_auroc")
    print(json.dumps({"file": str(out), "options": result.options.to_dict(),
                      **{k: result.measured[k] for k in shown if k in result.measured}},
                     indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
