"""Torch threads, OpenMP wait policy and precision for the embedded model on this CPU, side
by side: which configuration should `stackroute` run with?

Each configuration runs in its own process (OpenMP reads `OMP_WAIT_POLICY` once, when torch
loads), and the configurations take turns round by round, so drift in the machine's load hits
them alike. A round times three forward passes of SmolLM2-135M on a fresh KV: a 200-token
prefill (a routing call's new tokens), a 40-token tail (an unwinding or argument prompt's) and
a one-token decode step (a generation's). The first round is a warm-up.

    stackroute bench threads --rounds 5 --out bench/results/<date>-cpu-threads

Prints a Markdown table (medians over rounds, ms) and writes it with every sample to --out.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from stackroute.bench.engines import add_engine_options, needs_transformers
from stackroute.bench.environment import environment

PASSES = {"prefill_200": 200, "tail_40": 40, "decode_1": 1}
CONFIGS = [  # (threads, OpenMP waits, precision)
    (1, "active", "float32"), (2, "active", "float32"), (2, "passive", "float32"),
    (1, "active", "bfloat16"), (2, "active", "bfloat16"), (2, "passive", "bfloat16"),
]
# How a configuration's OpenMP threads wait (libgomp, torch's OpenMP): spin without bound,
# sleep at once, libgomp's default (a bounded spin), or spin N iterations then sleep.
WAITS = {"active": {"OMP_WAIT_POLICY": "ACTIVE"}, "passive": {"OMP_WAIT_POLICY": "PASSIVE"},
         "default": {}}
BURNER = "while True: pass"  # one busy core: the other jobs of a shared machine

# One round of one configuration: the median of 3 timings of each pass, as JSON on stdout.
ROUND = r"""
import json, statistics, sys, time
import torch
from stackroute.server.engines.model_store import load_model, resolve_model
threads, dtype, passes = int(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
model_dir = resolve_model(sys.argv[4] if len(sys.argv) > 4 and sys.argv[4] else None)
model = load_model(model_dir, dtype=dtype, num_threads=threads).model
ids = torch.randint(100, 40000, (1, max(passes.values())),
                    generator=torch.Generator().manual_seed(0))
out = {}
with torch.inference_mode():
    model(input_ids=ids[:, :8], use_cache=True, logits_to_keep=1)  # first-call costs
    for name, n in passes.items():
        times = []
        for _ in range(3):
            started = time.perf_counter()
            model(input_ids=ids[:, :n], use_cache=True, logits_to_keep=1)
            times.append((time.perf_counter() - started) * 1e3)
        out[name] = statistics.median(times)
print(json.dumps(out))
"""


def label(threads: int, policy: str, dtype: str) -> str:
    return f"{dtype}, {threads} thread{'s' if threads > 1 else ''}, {policy} waits"


@contextlib.contextmanager
def busy_processes(count: int) -> Iterator[None]:
    """`count` busy-loop processes running for the duration (the other jobs of a shared
    machine), killed on the way out."""
    burners = [subprocess.Popen([sys.executable, "-c", BURNER]) for _ in range(count)]
    try:
        yield
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


def wait_env(policy: str) -> dict[str, str]:
    """The environment a configuration's waits need.

    >>> wait_env("spin10000")
    {'GOMP_SPINCOUNT': '10000'}
    """
    if policy.startswith("spin") and policy[4:].isdigit():
        return {"GOMP_SPINCOUNT": policy[4:]}
    if policy not in WAITS:
        raise ValueError(f"waits must be one of {', '.join(WAITS)} or spinN; got {policy!r}")
    return WAITS[policy]


def parse_configs(text: str) -> list[tuple[int, str, str]]:
    """`2:passive:bfloat16,1:active:float32` -> configurations."""
    out = []
    for item in text.split(","):
        threads, policy, dtype = item.split(":")
        wait_env(policy)
        out.append((int(threads), policy, dtype))
    return out


def run_round(threads: int, policy: str, dtype: str,
              model: str | None = None) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env |= {"OMP_NUM_THREADS": str(threads), **wait_env(policy)}
    done = subprocess.run([sys.executable, "-c", ROUND, str(threads), dtype,
                           json.dumps(PASSES), model or ""], env=env, capture_output=True,
                          text=True, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def table(samples: dict[str, list[dict[str, float]]]) -> str:
    base = next(iter(samples))
    medians = {name: {p: statistics.median(r[p] for r in rounds) for p in PASSES}
               for name, rounds in samples.items()}
    lines = ["| configuration | " + " | ".join(f"{p} ms" for p in PASSES)
             + f" | prefill vs {base} |", "|---|" + "---|" * (len(PASSES) + 1)]
    for name, row in medians.items():
        ratio = row["prefill_200"] / medians[base]["prefill_200"]
        lines.append(f"| {name} | " + " | ".join(f"{row[p]:,.1f}" for p in PASSES)
                     + f" | {ratio:.2f} |")
    return "\n".join(lines) + "\n"


TRANSFORMERS_ONLY = "it times the model's own forward passes in fresh processes"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stackroute bench threads",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds (after a warm-up)")
    parser.add_argument("--configs", type=parse_configs, default=CONFIGS,
                        help="THREADS:WAITS:PRECISION,... (waits: active, passive, default, "
                             "spinN)")
    parser.add_argument("--busy", type=int, default=0,
                        help="busy-loop processes kept running meanwhile (a shared machine)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--smoke", action="store_true", help="one configuration, one round")
    add_engine_options(parser, transformers_only=TRANSFORMERS_ONLY)
    args = parser.parse_args(argv)
    needs_transformers(args.engine, "threads", TRANSFORMERS_ONLY)
    if args.smoke:
        args.rounds, args.configs = 1, args.configs[:1]
    env = environment()
    configs = args.configs
    samples: dict[str, list[dict[str, float]]] = {label(*c): [] for c in configs}
    loads: list[float] = []
    with busy_processes(args.busy):
        for round_ in range(args.rounds + 1):
            order = configs if round_ % 2 == 0 else configs[::-1]
            for config in order:
                result = run_round(*config, model=args.model)
                if round_:
                    samples[label(*config)].append(result)
            loads.append(os.getloadavg()[0])
    text = table(samples) + (f"\n{args.busy} busy-loop processes ran meanwhile; 1-minute "
                             f"load average after each round: "
                             f"{', '.join(f'{x:.1f}' for x in loads)}\n")
    print(text, end="")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "table.md").write_text(text)
        summary: dict[str, Any] = {"samples": samples, "loads": loads, "environment": env}
        (args.out / "samples.json").write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
