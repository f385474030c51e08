"""`stackroute bench missing-values`: a request that lacks a required value: is it asked, or
made up? (issue 25; When2Call's "follow-up question" case.)

Seal-Tools single-tool requests with gold arguments, at the gold leaf (routing not measured),
the product's argument values (`priors`, the 135M default's) under both `missing_values`
options, side by side in one process:
- `intact`: the request as written. A request that asks here asks for a value the request
  does not hold (its gold value is not in the text: the dataset's annotator supplied it) or
  one our candidates miss (a false ask): both are counted apart.
- `stripped`: for each required property whose gold value stands in the request once (its
  text, case-insensitive), the request with that text cut out ("Book a table for 4 at
  Luigi's" → "Book a table for at Luigi's"): the right answer is to ask for it. Counted by
  the property's type: `asked` (ask), and under `write` whether the model wrote a value
  (`written`) or another piece of the request took its place (`misplaced`: the ask cannot
  see a value is missing when the request holds something of its kind).

    stackroute bench missing-values --splits dev,test [--limit 200] [--out DIR]
    stackroute bench missing-values --smoke
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from stackroute.bench.experiments.right_call import SEAL_DIR, SPLITS, single_tool_queries
from stackroute.runtime.catalog import load_catalog
from stackroute.runtime.machine import StackMachine
from stackroute.runtime.tree import CapabilityTree, Node
from stackroute.server.engines.base import Engine
from stackroute.server.engines.registry import create_engine
from stackroute.server.routing.arguments import ArgumentFiller
from stackroute.server.routing.arguments.filling import FilledArguments
from stackroute.server.routing.options import (
    ArgumentValues,
    DraftSource,
    MissingValues,
    RouterOptions,
)
from stackroute.server.routing.router import build_machine
from stackroute.server.tools.evaluate import Query


def fill(engine: Engine, machine: StackMachine, leaf: Node, request: str,
         missing: MissingValues) -> FilledArguments:
    """The gold leaf's arguments for `request` as the product fills them (priors)."""
    parent = "/".join(leaf.path[:-1])
    state = machine.start(request, at=parent)
    return ArgumentFiller(engine, values=ArgumentValues.PRIORS,
                          missing=missing).fill(machine.request_for(state), leaf)


def stripped(request: str, value: Any) -> str | None:
    """`request` without the one place `value`'s text stands (None: absent, or there twice).

    >>> stripped("Book a table for 4 at Luigi's", 4)
    "Book a table for at Luigi's"
    >>> stripped("pay 5 and 5", 5) is None
    True
    """
    text = str(value).strip()
    if not text or isinstance(value, (bool, dict, list)):
        return None
    pattern = re.compile(rf"(?<![\w.@/-]){re.escape(text)}(?![\w@/-])", re.IGNORECASE)
    found = list(pattern.finditer(request))
    if len(found) != 1:
        return None
    start, end = found[0].span()
    return re.sub(r"\s{2,}", " ", request[:start] + request[end:]).strip()


def kind_of(schema: Any) -> str:
    kind = schema.get("type") if isinstance(schema, dict) else None
    return "number" if kind in ("number", "integer") else str(kind or "any")


def query_rows(engine: Engine, machine: StackMachine, tree: CapabilityTree,
               query: Query) -> list[dict[str, Any]]:
    leaf = tree.node(query.gold[0])
    schema = leaf.parameters or {}
    properties = schema.get("properties") or {}
    required = [n for n in schema.get("required") or () if n in properties]
    gold = dict(query.args[0]) if query.args else {}
    asked = fill(engine, machine, leaf, query.query, MissingValues.ASK).missing_values()
    rows = [{"id": query.id, "variant": "intact", "asked": list(asked),
             "asked_absent": [n for n in asked if n in gold
                              and stripped(query.query, gold[n]) is None]}]
    for name in required:
        if name not in gold:
            continue
        request = stripped(query.query, gold[name])
        if request is None:
            continue
        ask = fill(engine, machine, leaf, request, MissingValues.ASK)
        write = fill(engine, machine, leaf, request, MissingValues.WRITE)
        choice = next(c for c in write.choices if c.name == name)
        rows.append({"id": query.id, "variant": "stripped", "property": name,
                     "kind": kind_of(properties[name]), "request": request,
                     "gold": gold[name], "asked": name in ask.missing_values(),
                     "written": choice.source == "fallback",
                     "value_under_write": write.arguments.get(name)})
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    intact = [r for r in rows if r["variant"] == "intact"]
    cut = [r for r in rows if r["variant"] == "stripped"]
    by_kind: dict[str, Counter[str]] = {}
    for r in cut:
        counts = by_kind.setdefault(r["kind"], Counter())
        counts["variants"] += 1
        counts["asked"] += r["asked"]
        counts["written"] += r["written"]
        counts["misplaced"] += not r["asked"] and not r["written"]
    return {"intact_requests": len(intact),
            "intact_that_asked": sum(bool(r["asked"]) for r in intact),
            "intact_asked_for_a_value_not_in_the_request": sum(
                bool(r["asked_absent"]) for r in intact),
            "stripped_variants": len(cut),
            "stripped_asked": sum(r["asked"] for r in cut),
            "by_kind": {k: dict(v) for k, v in sorted(by_kind.items())}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stackroute bench missing-values",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--splits", default="dev",
                        help="Seal-Tools splits, comma-separated (tune on dev only)")
    parser.add_argument("--limit", type=int, default=200, help="requests per split")
    parser.add_argument("--model", default=None)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--smoke", action="store_true", help="3 dev queries")
    args = parser.parse_args(argv)
    if args.smoke:
        args.splits, args.limit = "dev", 3
    splits = [s for s in args.splits.split(",") if s]
    unknown = [s for s in splits if s not in SPLITS]
    if unknown:
        raise SystemExit(f"unknown split(s) {unknown}; expected some of {sorted(SPLITS)}")
    tree = load_catalog(SEAL_DIR / "seal-tools.catalog.json")
    engine = create_engine("transformers", model=args.model)
    machine = build_machine(tree, engine, options=RouterOptions(
        recovery=None, speculation=DraftSource.OFF))
    summaries: dict[str, Any] = {}
    for split in splits:
        rows: list[dict[str, Any]] = []
        for record in single_tool_queries(SEAL_DIR / SPLITS[split], offset=0,
                                          limit=args.limit):
            rows += query_rows(engine, machine, tree, Query.from_record(record))
        summaries[split] = summary(rows)
        print(json.dumps({split: summaries[split]}, indent=1), flush=True)
        if args.out is not None:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / f"missing-values-{split}.json").write_text(json.dumps(
                {"split": split, "model": engine.info.model, "summary": summaries[split],
                 "rows": rows}, indent=1, ensure_ascii=False) + "\n")
    if args.out is not None:  # the manifest's headline: each split's counts, flattened
        (args.out / "summary.json").write_text(json.dumps(
            {"model": engine.info.model} | {split: {k: v for k, v in s.items() if k != "by_kind"}
                                            for split, s in summaries.items()},
            indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
