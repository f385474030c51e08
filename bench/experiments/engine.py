"""Engine micro-benchmark (issue 3): prints ratios measured side by side in one run.

1. A 4-call hierarchical route (the scale-up catalog at 128 leaves: 4 routing levels) with
   the prefix cache on vs off. The route follows the gold path (teacher forcing), so both
   variants see exactly the same prompts; what differs is only what is prefilled.
2. Model steps per decision vs tokens in the answer (jump-forward over the menu trie: one
   forward pass decides a menu however many tokens the answer has).
3. Our constrained choice (one tree-attention pass over the menu trie, all option
   probabilities) vs outlines' own `Literal[...]` choice generation on the same model and the
   same prompt text (token-by-token decoding under a compiled regex).

Run: `stackroute bench engine [--repeats N] [--out DIR]`. Timings exclude
warm-up and model load; every variant runs `repeats` times interleaved, and the table shows
medians.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Literal

from stackroute.bench.engines import add_engine_options, build_engine, needs_transformers
from stackroute.bench.workloads.generate import generate_suite
from stackroute.runtime.catalog import build_tree
from stackroute.runtime.machine import StackMachine
from stackroute.runtime.prompt import Prompt
from stackroute.runtime.router import ScriptedRouter
from stackroute.runtime.tree import CapabilityTree
from stackroute.server.engines.transformers_engine import TransformersEngine


def gold_route_prompts(tree: CapabilityTree, query: str, gold: str) -> list[tuple[Prompt,
                                                                                tuple[str, ...]]]:
    """The prompts and menus of the step-by-step route to `gold` (no model involved)."""
    path = gold.split("/")
    script: list[Any] = [*path[:-1], (path[-1], {})]
    captured: list[tuple[Prompt, tuple[str, ...]]] = []

    class Capture(ScriptedRouter):
        def route(self, request: Any) -> Any:
            captured.append((request.prompt, request.menu.options))
            return super().route(request)

    machine = StackMachine(tree, Capture(script))
    state = machine.start(query)
    for _ in range(len(path)):
        machine.step(state)
    return captured


def route_once(engine: TransformersEngine, calls: list[tuple[Prompt, tuple[str, ...]]],
               ) -> dict[str, float]:
    engine.cache.clear()
    started = time.perf_counter()
    prefill = cached = passes = answer_tokens = 0
    for prompt, options in calls:
        result = engine.choose(prompt, options)
        prefill += result.usage.prefill_tokens
        cached += result.usage.cached_tokens
        passes += result.usage.forward_passes
        answer_tokens += result.usage.generated_tokens
    return {"wall_ms": (time.perf_counter() - started) * 1e3, "prefill_tokens": prefill,
            "cached_tokens": cached, "forward_passes": passes, "answer_tokens": answer_tokens}


def outlines_choice(engine: TransformersEngine, prompt_text: str, options: tuple[str, ...],
                    ) -> tuple[Any, float]:
    import outlines

    model = outlines.from_transformers(engine.model, engine.tokenizer)
    started = time.perf_counter()
    generator = outlines.Generator(model, Literal[options])  # type: ignore[valid-type]
    build_ms = (time.perf_counter() - started) * 1e3
    return generator, build_ms


TRANSFORMERS_ONLY = "a cache-off twin over the same weights, and its tokenizer for outlines"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stackroute bench engine",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--smoke", action="store_true", help="one repeat")
    add_engine_options(parser, transformers_only=TRANSFORMERS_ONLY)
    args = parser.parse_args(argv)
    needs_transformers(args.engine, "engine", TRANSFORMERS_ONLY)
    if importlib.util.find_spec("outlines") is None:
        print("stackroute bench engine compares with outlines: install the bench extra "
              "(pip install 'stackroute[bench]')", file=sys.stderr)
        return 2
    if args.smoke:
        args.repeats = 1

    gen = generate_suite("scale-up", num_leaves=128, seed=0)
    tree = build_tree(gen.catalog)
    query = gen.queries[0]
    calls = gold_route_prompts(tree, query["query"], query["gold"][0])
    on = build_engine("transformers", args.model)
    off = TransformersEngine(loaded=on.loaded, is_cache_enabled=False)
    route_once(on, calls)  # warm-up: compiles the menus, touches every code path
    route_once(off, calls)
    runs_on, runs_off = [], []
    for _ in range(args.repeats):
        runs_on.append(route_once(on, calls))
        runs_off.append(route_once(off, calls))

    def med(runs: list[dict[str, float]], key: str) -> float:
        return statistics.median(r[key] for r in runs)

    # Our choice vs outlines' Literal generation on the root menu's prompt text.
    root_prompt, root_options = calls[0]
    prompt_text = on.renderer.decode(on.renderer.prompt_ids(root_prompt))
    generator, outlines_build_ms = outlines_choice(on, prompt_text, root_options)
    ours_ms, theirs_ms, agree = [], [], 0
    for _ in range(args.repeats):
        t = time.perf_counter()
        ours = off.choose(root_prompt, root_options)
        ours_ms.append((time.perf_counter() - t) * 1e3)
        t = time.perf_counter()
        theirs = generator(prompt_text, max_new_tokens=32)
        theirs_ms.append((time.perf_counter() - t) * 1e3)
        agree += int(str(theirs).strip() == ours.choice)

    result = {
        "route_calls": len(calls),
        "prompt_tokens_per_route": sum(on.count_tokens(p) for p, _ in calls),
        "cache_on": {k: med(runs_on, k) for k in runs_on[0]},
        "cache_off": {k: med(runs_off, k) for k in runs_off[0]},
        "route_wall_ratio_off_over_on": med(runs_off, "wall_ms") / med(runs_on, "wall_ms"),
        "prefill_ratio_off_over_on": med(runs_off, "prefill_tokens") / max(
            med(runs_on, "prefill_tokens"), 1),
        "forward_passes_per_decision": med(runs_on, "forward_passes") / len(calls),
        "answer_tokens_per_decision": med(runs_on, "answer_tokens") / len(calls),
        "ours_choice_ms_p50": statistics.median(ours_ms),
        "outlines_choice_ms_p50": statistics.median(theirs_ms),
        "outlines_generator_build_ms": outlines_build_ms,
        "choice_speedup_outlines_over_ours": statistics.median(theirs_ms) / statistics.median(
            ours_ms),
        "choice_agreement": agree / args.repeats,
        "menu_options_at_root": len(root_options),
        "machine": {"python": sys.version.split()[0], "platform": platform.platform(),
                    "processor": platform.processor()},
        "commit": _commit(),
        "engine": {"model": on.info.model, "dtype": on.info.dtype},
        "repeats": args.repeats,
    }
    _print_table(result)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "engine_bench.json").write_text(json.dumps(result, indent=2))
    return 0


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _print_table(r: dict[str, Any]) -> None:
    on, off = r["cache_on"], r["cache_off"]
    rows = [
        ("4-call route wall ms (cache off / on)",
         f"{off['wall_ms']:.0f} / {on['wall_ms']:.0f}",
         f"{r['route_wall_ratio_off_over_on']:.2f}x"),
        ("prefilled tokens (cache off / on)",
         f"{off['prefill_tokens']:.0f} / {on['prefill_tokens']:.0f}",
         f"{r['prefill_ratio_off_over_on']:.2f}x"),
        ("forward passes vs answer tokens per decision",
         f"{r['forward_passes_per_decision']:.2f} / {r['answer_tokens_per_decision']:.2f}",
         f"{r['answer_tokens_per_decision'] / max(r['forward_passes_per_decision'], 1e-9):.2f}x"),
        (f"choice ms, outlines Literal / ours ({r['menu_options_at_root']} options)",
         f"{r['outlines_choice_ms_p50']:.0f} / {r['ours_choice_ms_p50']:.0f}",
         f"{r['choice_speedup_outlines_over_ours']:.2f}x"),
    ]
    width = max(len(a) for a, _, _ in rows)
    for a, b, c in rows:
        sys.stdout.write(f"{a:<{width}}  {b:>16}  {c:>8}\n")
    sys.stdout.write(f"outlines generator build: {r['outlines_generator_build_ms']:.0f} ms; "
                     f"choice agreement {r['choice_agreement']:.2f}\n")


if __name__ == "__main__":
    raise SystemExit(main())
