"""What the abstention check costs where a tool does serve the request, suite by suite, and
what it stops where none does: every request of every suite, not a sample. A check that asks
the model nothing (the embedded default's: evidence margin, lead and the request's values)
reads them in seconds; one that asks the model (the 1.5B tier's) needs `--model`, and costs
its model calls per request.

    stackroute bench abstention-cost [--calibration FILE] [--model M] [--seal N] [--limit N]
        [--out DIR] [--smoke]

For each request of each suite (`policy.py`'s: semantic-overlap 16/32/64, noisy-two-step-32,
clean-semantic-32, Seal-Tools `test` and `test-ood` single-tool; and scale-up-32 and the bank
example), the leaf the evidence ranks first stands for the router's first leaf (the guided
router follows its evidence; `bench out-of-scope --judge-evidence-leaf` probes the same
leaf), and the calibration's check judges it. Per suite:
- in scope: requests whose first leaf is their gold leaf, and how many of those the check
  stops (successes it costs);
- out of scope (the generated suites' own items): how many the check stops.
Without `--model` no model is loaded, and a check that weighs the model's answers is refused.
"""

from __future__ import annotations

import argparse
import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from stackroute.bench.environment import git_state
from stackroute.bench.experiments.policy import REPORT_SEED, suites
from stackroute.bench.workloads.datasets import generated_dataset
from stackroute.runtime.catalog import load_catalog
from stackroute.runtime.errors import InputError
from stackroute.runtime.prompt import PromptStyle
from stackroute.server.engines.base import Engine
from stackroute.server.engines.model_store import DEFAULT_GGUF_FILENAME
from stackroute.server.routing.abstention import (
    AbstentionCheck,
    AbstentionOptions,
    read_abstention,
)
from stackroute.server.routing.calibration import calibration_file
from stackroute.server.routing.router import default_embedder, evidence_for_tree
from stackroute.server.tools.abstention_calibration import evidence_leaf_sample
from stackroute.server.tools.abstention_fit import Label
from stackroute.server.tools.calibration_records import Dataset
from stackroute.server.tools.evaluate import read_queries

log = logging.getLogger(__name__)
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DEFAULT_CALIBRATION = calibration_file(DEFAULT_GGUF_FILENAME.removesuffix(".gguf"))


@dataclass(frozen=True)
class SuiteCost:
    suite: str
    in_scope: int  # single-leaf requests with a gold leaf
    first_leaf_right: int  # of those, the evidence's first leaf is the gold one
    successes_stopped: int  # of those, the check stops
    out_of_scope: int
    out_of_scope_stopped: int
    stopped_examples: list[str]  # the in-scope successes it stops (their text)

    @property
    def cost(self) -> float | None:
        return self.successes_stopped / self.first_leaf_right if self.first_leaf_right else None


def judge_suite(dataset: Dataset, check_options: AbstentionOptions,
                embedder: Any, engine: Engine | None = None) -> SuiteCost:
    """The check on every single-leaf request of `dataset`, at the evidence's first leaf;
    `engine` answers a check that asks the model (None: only a model-free check is read)."""
    if check_options.is_judge_enabled and engine is None:
        raise InputError("this check asks the model (is_judge_enabled): name its model with "
                         "--model")
    evidence = evidence_for_tree(dataset.tree, embedder)
    check = AbstentionCheck(engine, check_options, evidence)
    right = stopped = oos = oos_stopped = in_scope = 0
    examples: list[str] = []
    for query in dataset.queries:
        if len(query.gold) > 1:
            continue
        _, sample, _ = evidence_leaf_sample(check, dataset.tree, query)
        stops = check_options.abstains(sample.features)
        if sample.label is Label.ABSTAIN:
            oos += 1
            oos_stopped += stops
            continue
        in_scope += 1
        if sample.label is Label.CALL:
            right += 1
            if stops:
                stopped += 1
                examples.append(query.query)
    return SuiteCost(dataset.name, in_scope, right, stopped, oos, oos_stopped, examples)


def datasets(*, limit: int, seal: int, smoke: bool) -> list[Dataset]:
    if smoke:
        return [generated_dataset("semantic-overlap", 16, seed=REPORT_SEED, limit=limit)]
    out = suites((16, 32, 64), limit=limit, seal=seal)
    out.append(generated_dataset("scale-up", 32, seed=REPORT_SEED, limit=limit))
    out.append(Dataset("bank-example", load_catalog(EXAMPLES / "bank.catalog.json"),
                       read_queries(EXAMPLES / "bank.queries.jsonl"), PromptStyle()))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stackroute bench abstention-cost",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--calibration", type=Path, default=DEFAULT_CALIBRATION,
                        help="the calibration file whose abstention check is judged "
                             "(default: the embedded model's)")
    parser.add_argument("--model", default=None,
                        help="the model that answers a check that asks it (the calibration's "
                             "model); none: only a model-free check is read")
    parser.add_argument("--limit", type=int, default=200, help="requests per generated suite")
    parser.add_argument("--seal", type=int, default=1000,
                        help="Seal-Tools single-tool requests per split (all: 1000)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--smoke", action="store_true", help="one small suite")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    calibrated = read_abstention(args.calibration)
    if calibrated is None:
        parser.error(f"{args.calibration} has no abstention check")
    options = calibrated.options
    engine = None
    if args.model is not None:
        from stackroute.server.engines.registry import create_engine

        engine = create_engine("transformers", model=args.model)
    embedder = default_embedder()
    costs = []
    for dataset in datasets(limit=4 if args.smoke else args.limit, seal=args.seal,
                            smoke=args.smoke):
        try:
            cost = judge_suite(dataset, options, embedder, engine)
        except InputError as e:
            parser.error(f"{args.calibration}: {e}")
        log.info("%s: %d of %d right first leaves stopped, %d of %d out of scope stopped",
                 cost.suite, cost.successes_stopped, cost.first_leaf_right,
                 cost.out_of_scope_stopped, cost.out_of_scope)
        costs.append(cost)
    total_right = sum(c.first_leaf_right for c in costs)
    total_oos = sum(c.out_of_scope for c in costs)
    summary = {
        "calibration": str(args.calibration), "check": options.to_dict(),
        "first_leaf_right": total_right,
        "successes_stopped": sum(c.successes_stopped for c in costs),
        "cost": sum(c.successes_stopped for c in costs) / total_right if total_right else None,
        "out_of_scope": total_oos,
        "out_of_scope_stopped": sum(c.out_of_scope_stopped for c in costs),
        "worst_suite_cost": max((c.cost for c in costs if c.cost is not None), default=None)}
    result = {"summary": summary, "suites": [asdict(c) | {"cost": c.cost} for c in costs],
              "git": git_state()}
    text = json.dumps(result, indent=2)
    print(text)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "results.json").write_text(text + "\n", encoding="utf-8")
        (args.out / "summary.json").write_text(json.dumps(
            {k: v for k, v in summary.items() if k != "check"}, indent=2) + "\n",
            encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
