"""Argument generation with drafts, with jump-forward only, and token by token, side by side,
on Seal-Tools dev schemas.

For each single-tool dev query: the gold leaf's argument prompt (as the router builds it) and
its schema, generated greedily by the embedded engine three times: as configured by default
(jump-forward plus drafts looked up in the prompt, `server/engines/prompt_lookup.py`), with
jump-forward only (forced tokens in the tokenizer's spelling, fed with the next sampled
token: no pass of their own), and sampling every token. Reported: forward passes per
generated token, how often answers equal the jump-forward-only one (drafting must not change
them), schema validity, answers that hit the token cap (`finish_reason == "length"`) or the
free-string cap. Every variant runs with the same `max_string_chars` (the default).

    stackroute bench jump-forward --queries 24 \
        --out bench/results/<date>-cpu-jump-forward
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

import jsonschema
from stackroute.bench.engines import add_engine_options, needs_transformers
from stackroute.bench.environment import environment
from stackroute.runtime.catalog import load_catalog
from stackroute.runtime.messages import Message
from stackroute.runtime.prompt import Prompt, PromptLayout
from stackroute.server.engines.base import Constraint, SamplingOptions
from stackroute.server.engines.model_store import load_model, resolve_model
from stackroute.server.engines.transformers_engine import TransformersEngine

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "seal-tools"
MAX_TOKENS = 384  # the router's argument budget


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stackroute bench jump-forward",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=int, default=24)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--smoke", action="store_true", help="2 queries")
    add_engine_options(parser, transformers_only="three engines over one set of weights "
                       "with different draft settings")
    args = parser.parse_args(argv)
    needs_transformers(args.engine, "jump-forward", "its draft and jump-forward settings")
    if args.smoke:
        args.queries = 2
    if not (args.data / "seal-tools.catalog.json").is_file():
        parser.error(f"--data expects the seal-tools folder, got {args.data}")
    tree = load_catalog(args.data / "seal-tools.catalog.json")
    layout = PromptLayout(tree)
    queries = [json.loads(line) for line in (args.data / "dev.queries.jsonl").open()]
    queries = [q for q in queries if "single-tool" in q["tags"]][: args.queries]
    loaded = load_model(resolve_model(args.model), dtype="float32")
    variants = {"drafts": TransformersEngine(loaded=loaded),
                "jump_forward": TransformersEngine(loaded=loaded, max_draft_tokens=0),
                "every_token": TransformersEngine(loaded=loaded, is_jump_forward=False,
                                                  max_draft_tokens=0)}
    rows = []
    for query in queries:
        leaf = tree.node(query["gold"][0])
        schema = leaf.parameters or {"type": "object", "properties": {}}
        prompt = Prompt((Message("system", "You fill in tool arguments as JSON."),
                         layout.arguments_request(leaf, query["query"])))
        row: dict[str, Any] = {"id": query["id"], "leaf": leaf.name}
        for name, engine in variants.items():
            out = engine.generate(prompt, constraint=Constraint.json(schema),
                                  sampling=SamplingOptions(max_tokens=MAX_TOKENS))
            try:
                jsonschema.validate(json.loads(out.text), schema)
                is_valid = True
            except (ValueError, jsonschema.ValidationError):
                is_valid = False
            row[name] = {"text": out.text, "finish_reason": out.finish_reason,
                         "generated_tokens": out.usage.generated_tokens,
                         "forward_passes": out.usage.forward_passes,
                         "latency_ms": out.usage.latency_ms, "is_valid": is_valid,
                         "is_string_capped": out.is_string_capped}
        rows.append(row)
    summary: dict[str, Any] = {"num_queries": len(rows), "max_tokens": MAX_TOKENS,
                               "max_string_chars": variants["drafts"].max_string_chars,
                               "max_draft_tokens": variants["drafts"].max_draft_tokens}
    for name in variants:
        runs = [r[name] for r in rows]
        tokens = sum(r["generated_tokens"] for r in runs)
        passes = sum(r["forward_passes"] for r in runs)
        summary[name] = {
            "generated_tokens": tokens, "forward_passes": passes,
            "tokens_per_pass": tokens / passes,
            "valid": sum(r["is_valid"] for r in runs),
            "at_token_cap": sum(r["finish_reason"] == "length" for r in runs),
            "string_capped": sum(r["is_string_capped"] for r in runs),
            "latency_ms_p50": statistics.median(r["latency_ms"] for r in runs)}
    for name in ("drafts", "every_token"):
        summary[f"{name}_equal_to_jump_forward"] = sum(
            r[name]["text"] == r["jump_forward"]["text"] for r in rows)
        summary[f"{name}_latency_ratio_p50"] = (summary[name]["latency_ms_p50"]
                                                / summary["jump_forward"]["latency_ms_p50"])
    summary["environment"] = environment()
    print(json.dumps(summary, indent=1))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
        (args.out / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
