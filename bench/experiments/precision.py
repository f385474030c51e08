"""bfloat16 vs float32, and 1 vs 2 torch threads, for the embedded model on CPU, side by side.

For each configuration (dtype x threads) and each routing prompt: one menu decision with the
prefix cache off (the whole prompt is prefilled: prefill latency), and one JSON argument
generation under a schema, its prompt already in the prefix cache (so its passes are decode
steps: decode latency per forward pass). The
configurations alternate within each repeat, so drift in the machine's load hits them alike;
the first repeat is a warm-up and is not timed. Decisions are compared with float32's on the
same prompts: a flip is a different choice; the largest probability gap is reported too.

    stackroute bench precision --repeats 3 --out bench/results/<date>-cpu-precision

Prints one JSON object (the summary) and writes it, with every sample, under --out.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from stackroute.bench.engines import add_engine_options, needs_transformers
from stackroute.bench.environment import environment
from stackroute.runtime.messages import Message
from stackroute.runtime.prompt import Prompt
from stackroute.server.engines.base import Constraint, SamplingOptions
from stackroute.server.engines.model_store import load_model, resolve_model
from stackroute.server.engines.transformers_engine import TransformersEngine

SYSTEM = ("You route requests to tools. Pick the one option that handles the request, or DONE "
          "when nothing applies. Answer with the option name only.")
CASES: list[tuple[str, tuple[str, ...]]] = [
    ("Send 500 dollars to Asha", ("payments", "accounts", "cards", "support", "DONE")),
    ("What's the weather in Paris tomorrow?", ("weather", "calendar", "email", "maps", "DONE")),
    ("Block my credit card, I lost it", ("payments", "accounts", "cards", "support", "DONE")),
    ("Find recent news about solar panels", ("search_web", "search_file", "search_email",
                                             "DONE")),
    ("Book a meeting with Sam at 3pm", ("weather", "calendar", "email", "maps", "DONE")),
    ("Show my last three card payments", ("pay", "payment", "payments_history", "refund",
                                          "BACK")),
    ("Translate 'good morning' into French", ("translate", "summarise", "spell_check",
                                              "DONE")),
    ("How much is 12% of 250?", ("calculator", "converter", "search_web", "DONE")),
]
ARGS_SCHEMA = {"type": "object", "properties": {
    "payee": {"type": "string"}, "amount": {"type": "number"},
    "note": {"type": "string"}}, "required": ["payee", "amount", "note"]}
DECODE_TOKENS = 24


def menu_prompt(request: str, options: tuple[str, ...]) -> Prompt:
    return Prompt((Message("system", SYSTEM),
                   Message("user", f"Request: {request}\nOptions: {', '.join(options)}")))


def run_config(engine: TransformersEngine, cached: TransformersEngine,
               threads: int) -> dict[str, Any]:
    import torch

    torch.set_num_threads(threads)
    out: dict[str, Any] = {"prefill_ms": [], "decode_ms_per_pass": [], "decisions": [],
                           "probabilities": [], "prompt_tokens": []}
    for request, options in CASES:
        prompt = menu_prompt(request, options)
        result = engine.choose(prompt, options)
        out["prefill_ms"].append(result.usage.latency_ms)
        out["prompt_tokens"].append(result.usage.prompt_tokens)
        out["decisions"].append(result.choice)
        out["probabilities"].append(result.probabilities)
        args_prompt = prompt.extend(Message("assistant", options[0]),
                                    Message("user", f"Arguments as JSON for: {request}"))
        cached.generate(args_prompt, sampling=SamplingOptions(max_tokens=1))  # cache it
        gen = cached.generate(args_prompt, constraint=Constraint.json(ARGS_SCHEMA),
                              sampling=SamplingOptions(max_tokens=DECODE_TOKENS))
        out["decode_ms_per_pass"].append(gen.usage.latency_ms / gen.usage.forward_passes)
        out.setdefault("arguments", []).append(gen.text)
    return out


TRANSFORMERS_ONLY = "it compares dtypes over shared weights with the prefix cache off"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stackroute bench precision",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats (after warm-up)")
    parser.add_argument("--smoke", action="store_true", help="one repeat, two prompts")
    parser.add_argument("--out", type=Path, default=None)
    add_engine_options(parser, transformers_only=TRANSFORMERS_ONLY)
    args = parser.parse_args(argv)
    needs_transformers(args.engine, "precision", TRANSFORMERS_ONLY)
    global CASES
    if args.smoke:
        CASES = CASES[:2]
        args.repeats = 1
    env = environment()
    model_dir = resolve_model(args.model)
    loaded = {dtype: load_model(model_dir, dtype=dtype) for dtype in ("float32", "bfloat16")}
    engines = {d: TransformersEngine(loaded=m, is_cache_enabled=False) for d, m in loaded.items()}
    cached = {d: TransformersEngine(loaded=m) for d, m in loaded.items()}
    configs = [(d, t) for d in engines for t in (1, 2)]
    samples: dict[str, list[dict[str, Any]]] = {f"{d}/{t}": [] for d, t in configs}
    for repeat in range(args.repeats + 1):
        order = configs if repeat % 2 == 0 else configs[::-1]
        for dtype, threads in order:
            result = run_config(engines[dtype], cached[dtype], threads)
            if repeat > 0:  # repeat 0 warms every configuration up
                samples[f"{dtype}/{threads}"].append(result)
    summary = summarize(samples)
    summary["environment"] = env
    summary["decode_tokens"] = DECODE_TOKENS
    summary["num_prompts"] = len(CASES)
    print(json.dumps(summary, indent=1))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
        (args.out / "samples.json").write_text(json.dumps(samples) + "\n")
    return 0


def summarize(samples: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    base = "float32/2"
    rows: dict[str, Any] = {}
    for name, runs in samples.items():
        prefill = [ms for run in runs for ms in run["prefill_ms"]]
        decode = [ms for run in runs for ms in run["decode_ms_per_pass"]]
        rows[name] = {"prefill_ms_p50": statistics.median(prefill),
                      "decode_ms_per_pass_p50": statistics.median(decode)}
    for row in rows.values():
        row["prefill_ratio_vs_float32_2"] = row["prefill_ms_p50"] / rows[base]["prefill_ms_p50"]
        row["decode_ratio_vs_float32_2"] = (row["decode_ms_per_pass_p50"]
                                            / rows[base]["decode_ms_per_pass_p50"])
    reference = samples[base][0]
    flips: dict[str, Any] = {}
    for name, runs in samples.items():
        found, gap = [], 0.0
        for run in runs:
            for i, (choice, probs) in enumerate(zip(run["decisions"], run["probabilities"],
                                                    strict=True)):
                if choice != reference["decisions"][i]:
                    found.append({"prompt": CASES[i][0], "float32": reference["decisions"][i],
                                  name: choice})
                gap = max(gap, max(abs(p - reference["probabilities"][i][o])
                                   for o, p in probs.items()))
        same_args = sum(a == b for run in runs
                        for a, b in zip(run["arguments"], reference["arguments"], strict=True))
        flips[name] = {"num_flips": len(found), "flips": found[:8],
                       "max_probability_gap": gap,
                       "same_arguments": f"{same_args}/{len(runs) * len(CASES)}"}
    return {"latency": rows, "decisions_vs_float32": flips,
            "float32_decisions": reference["decisions"]}


if __name__ == "__main__":
    raise SystemExit(main())
