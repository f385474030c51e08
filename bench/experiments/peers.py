"""`stackroute bench peers`: our engine beside its peers on the same calls, in one process.

The workload (`peers_workload.py`): real requests of the cache suite's 16-tool catalog
(scale-up), teacher-forced along their gold routes — the routing calls that descend, the
leaf's argument generation, the `DONE` calls that unwind — and Seal-Tools dev argument
generations under their gold leaf's schema. Every system gets the same token ids, the same
model (SmolLM2-135M-Instruct, float32 on the transformers side: one model object shared by
the transformers systems), the same thread count, greedy decoding under the same constraint:

- `ours`: the embedded engine (`create_engine("transformers")`): `choose` for a menu,
  schema-constrained `generate` for arguments (`peers_ours.py`);
- `xgrammar`: a hand-written greedy loop with xgrammar's matcher and bitmask and one KV slot
  reused across calls (`peers_xgrammar.py`): the strongest hand-built peer;
- `ours-path` (named by hand): the same engine taking a request's calls as the product's
  router does when it verifies a drafted path: the descent in one pass, the unwind in one
  pass (`peers/ours.py`);
- `ours-router` (named by hand, `--workload many` only): not a teacher-forced engine but the
  product's default router on each request, its own decisions, its accuracy beside its speed
  (`peers/router_system.py`);
- `outlines`: its `Literal[...]` choice and JSON-schema generation (`peers_outlines.py`);
- `llama.cpp`: llama-cpp-python with GBNF and its slot's prefix reuse, on the shipped GGUF
  (`peers_llama.py`). A manual run: the package builds from source (over 10 minutes on 2
  cores), so it is not installed by the `bench` extra; install it by hand and name it in
  `--systems`.

Systems run item by item, each item's calls in order, the systems' order rotated per item so
none always goes first (items alternate: a request, an argument case, …); constraints are
compiled and one decision and one argument call run once per system before timing (then every
prefix cache is cleared). `--max-run-s` stops starting items after that long, so a busy
machine still ends with paired rows (every system ran every item that started). A system named in
`--systems` whose package is not installed is skipped with the reason in the summary.

    stackroute bench peers --requests 8 --arguments 8 --out bench/results/<date>-cpu-peers
    stackroute bench peers --smoke      # 1 request, 1 argument case

`--workload many` (`peers/many.py`) asks the across-requests question instead: many requests
on one catalog (scale-up, 128 tools by default), in the product's menu-first prompt order,
each system keeping its cache from one request to the next where it can (ours: its prefix
cache; xgrammar: its slot's longest common prefix; llama.cpp: its slot; outlines keeps none),
the catalog warmed on load untimed for every system (`--warm root`, as the product does; or
`--warm none`), and the first request reported apart from the second and later:

    stackroute bench peers --workload many --requests 20 --systems ours,xgrammar --dtype auto
    stackroute bench peers --workload many --smoke    # 2 requests: the first and one later

Writes calls.jsonl (one line per system per call), summary.json and tables.md in `--out`.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stackroute.bench.environment import environment
from stackroute.bench.peers.many import (
    CARRIES_CACHE,
    MANY_LEAVES,
    SMOKE_REQUESTS,
    WarmOnLoad,
    many_workload,
)
from stackroute.bench.peers.many_tables import markdown_many
from stackroute.bench.peers.system import PassCounter, PeerSystem, run_item
from stackroute.bench.peers.tables import agreement, by_source, markdown, ratios, system_rows
from stackroute.bench.peers.workload import (
    MAX_ARGUMENT_TOKENS,
    argument_items,
    interleave,
    request_items,
)
from stackroute.runtime.tree import CapabilityTree

SYSTEMS = ("ours", "xgrammar", "outlines", "llama.cpp")
# run only when named: ours taking a request's calls at once, as the product's router does;
# and (--workload many) the product's router on each request, its own decisions
KNOWN_SYSTEMS = (*SYSTEMS, "ours-path", "ours-router")
REQUEST_ONLY = ("ours-router",)  # route whole requests: --workload many only
# NAME@PRECISION runs a system on that precision's model; auto: the product's choice for this
# CPU (`cpu_dtype.resolve_dtype`: bfloat16 where the CPU multiplies it natively)
DTYPES = ("float32", "bfloat16", "auto")
WORKLOADS = ("mixed", "many")
PACKAGES = {"ours": "torch", "ours-path": "torch", "ours-router": "torch",
            "xgrammar": "xgrammar", "outlines": "outlines", "llama.cpp": "llama_cpp"}
INSTALL_HINTS = {"outlines": "pip install 'outlines>=1.2' (the bench extra)",
                 "llama.cpp": "pip install llama-cpp-python (a source build; a manual run)",
                 "xgrammar": "pip install xgrammar", "ours": "pip install torch",
                 "ours-path": "pip install torch", "ours-router": "pip install torch"}


@dataclass(frozen=True)
class PeersOptions:
    num_requests: int = 8
    num_arguments: int = 8
    num_leaves: int | None = None  # mixed: 16; many: MANY_LEAVES
    systems: tuple[str, ...] = SYSTEMS
    num_threads: int = 2
    dtype: str = "float32"  # of the systems named without @PRECISION
    seed: int = 0
    model: str | None = None
    out_dir: Path | None = None
    max_argument_tokens: int = MAX_ARGUMENT_TOKENS  # the router's budget
    is_warm_up: bool = True  # one decision and one argument call per system, untimed
    max_run_s: float | None = None  # no item starts after this (every system runs each item)
    command: str = ""
    workload: str = "mixed"  # mixed: requests and argument cases; many: `peers/many.py`
    warm: WarmOnLoad = WarmOnLoad.ROOT  # many: what each system computes at catalog load


def split_system(name: str) -> tuple[str, str | None]:
    """`ours@bfloat16` -> ("ours", "bfloat16"); a plain name runs at `--dtype`.

    >>> split_system("xgrammar@bfloat16"), split_system("ours")
    (('xgrammar', 'bfloat16'), ('ours', None))
    """
    base, _, dtype = name.partition("@")
    return base, dtype or None


def missing_systems(names: Sequence[str]) -> dict[str, str]:
    """{name: why it cannot run here} for the named systems whose package is missing; an
    unknown name (or precision) is a ValueError listing the known ones."""
    unknown = [n for n in names if split_system(n)[0] not in KNOWN_SYSTEMS]
    if unknown:
        raise ValueError(f"unknown system(s) {', '.join(unknown)}; known: "
                         f"{', '.join(KNOWN_SYSTEMS)} (each optionally @float32, @bfloat16 "
                         "or @auto)")
    bad = [n for n in names if split_system(n)[1] not in (None, *DTYPES)]
    if bad:
        raise ValueError(f"unknown precision in {', '.join(bad)}; known: {', '.join(DTYPES)}")
    return {n: f"{PACKAGES[split_system(n)[0]]} is not installed "
               f"({INSTALL_HINTS[split_system(n)[0]]})" for n in names
            if importlib.util.find_spec(PACKAGES[split_system(n)[0]]) is None}


def build_systems(names: Sequence[str], load: Callable[[str | None], Any], *,
                  num_threads: int,
                  tree: CapabilityTree | None = None) -> list[PeerSystem]:
    """The named systems, each on the model `load(precision)` returns (one model object per
    precision, shared by the transformers systems); `ours-router` routes `tree`'s requests."""
    systems: list[PeerSystem] = []
    counters: dict[str | None, PassCounter] = {}
    for name in names:
        base, dtype = split_system(name)
        loaded = load(dtype)
        system: PeerSystem
        if base == "ours":
            from stackroute.bench.peers.ours import OursSystem
            system = OursSystem(loaded)
        elif base == "ours-path":
            from stackroute.bench.peers.ours import OursPathSystem
            system = OursPathSystem(loaded)
        elif base == "ours-router":
            from stackroute.bench.peers.router_system import RouterSystem
            if tree is None:
                raise ValueError("ours-router routes a catalog's requests: --workload many")
            system = RouterSystem(loaded, tree)
        elif base == "xgrammar":
            from stackroute.bench.peers.xgrammar_peer import XgrammarSystem
            system = XgrammarSystem(loaded)
        elif base == "outlines":
            from stackroute.bench.peers.outlines_peer import OutlinesSystem
            counter = counters.setdefault(dtype, PassCounter(loaded.model))
            system = OutlinesSystem(loaded, counter)
        else:
            from stackroute.bench.peers.llama_peer import LlamaCppSystem
            system = LlamaCppSystem(loaded, num_threads=num_threads)
        system.name = name
        systems.append(system)
    return systems


def run_peers(options: PeersOptions) -> dict[str, Any]:
    """Run the workload through every installed system; the summary (and files in
    `options.out_dir`)."""
    from stackroute.server.engines.cpu_dtype import resolve_dtype
    from stackroute.server.engines.model_store import load_model, resolve_model
    from stackroute.server.engines.rendering import ChatRenderer

    started = time.perf_counter()
    skipped = missing_systems(options.systems)
    names = [n for n in options.systems if n not in skipped]
    env = environment()  # read at the start: a long run outlives commits made meanwhile
    models: dict[str, Any] = {}

    def load(dtype: str | None) -> Any:
        dtype = resolve_dtype(dtype or options.dtype)  # one model for auto and what it means
        if dtype not in models:
            models[dtype] = load_model(resolve_model(options.model), dtype=dtype,
                                       num_threads=options.num_threads)
        return models[dtype]

    renderer = ChatRenderer(load(None).tokenizer)
    if options.workload == "many":
        return run_many_peers(options, renderer, names, load, skipped=skipped,
                              environment=env, started=started)
    requests = request_items(renderer, num_leaves=options.num_leaves or 16,
                             num_requests=options.num_requests, seed=options.seed,
                             max_argument_tokens=options.max_argument_tokens)
    cases = argument_items(renderer, num_queries=options.num_arguments,
                           max_argument_tokens=options.max_argument_tokens)
    items = interleave(requests, cases)
    systems = build_systems(names, load, num_threads=options.num_threads)
    all_calls = [c for item in items for c in item.calls]
    compile_ms = {}
    for system in systems:
        t = time.perf_counter()
        system.prepare(all_calls)
        compile_ms[system.name] = (time.perf_counter() - t) * 1e3
    # a first call of each kind the run has (an argument case's generation before a request's)
    firsts = {c.kind: c for item in reversed([*cases, *requests]) for c in reversed(item.calls)}
    warm_up = list(firsts.values()) if options.is_warm_up else []
    for system in systems:  # every code path once, outside the timed region
        for call in warm_up:
            system.run(call)
        system.clear_cache()
    records: list[dict[str, Any]] = []
    timed_from = time.perf_counter()
    num_items_run = 0
    for k, item in enumerate(items):
        if options.max_run_s is not None and time.perf_counter() - timed_from > options.max_run_s:
            break
        num_items_run += 1
        order = systems[k % len(systems):] + systems[:k % len(systems)] if systems else []
        for system in order:
            records.extend(run_item(system, item))
    summary = summarize(records, [s.name for s in systems], options=options, skipped=skipped,
                        compile_ms=compile_ms, environment=env)
    summary["prompt_id_mismatches"] = {s.name: s.num_prompt_mismatches for s in systems
                                       if hasattr(s, "num_prompt_mismatches")}
    summary["wall_s"] = round(time.perf_counter() - started, 1)
    summary["num_items_run"] = num_items_run
    summary["num_items_planned"] = len(items)
    if options.out_dir is not None:
        write(options.out_dir, records, summary)
    return summary


def run_many_peers(options: PeersOptions, renderer: Any, names: Sequence[str],
                   load: Callable[[str | None], Any], *, skipped: dict[str, str],
                   environment: dict[str, Any], started: float) -> dict[str, Any]:
    """`--workload many` (`peers/many.py`): the summary (and files in `options.out_dir`)."""
    from stackroute.bench.peers.many_run import run_many
    from stackroute.bench.peers.many_tables import summarize_many

    workload = many_workload(renderer, num_leaves=options.num_leaves or MANY_LEAVES,
                             num_requests=options.num_requests, seed=options.seed,
                             max_argument_tokens=options.max_argument_tokens)
    systems = build_systems(names, load, num_threads=options.num_threads, tree=workload.tree)
    all_calls = [c for item in (*workload.requests, workload.code_warm_up) for c in item.calls]
    compile_ms = {}
    for system in systems:
        t = time.perf_counter()
        system.prepare([*all_calls, workload.warm_call])
        compile_ms[system.name] = round((time.perf_counter() - t) * 1e3, 1)
    run = run_many(systems, workload, warm=options.warm, max_run_s=options.max_run_s)
    names = [s.name for s in systems]
    facts = {"command": options.command, "workload": "many", "catalog": workload.catalog,
             "num_requests": options.num_requests, "num_requests_run": run.num_requests_run,
             "num_shared_tokens": workload.num_shared_tokens, "warm": options.warm.value,
             "warm_costs": {k: vars(v) for k, v in run.warm_costs.items()},
             "carries_cache": {n: CARRIES_CACHE[split_system(n)[0]] for n in names},
             "skipped": skipped, "num_threads": options.num_threads, "dtype": options.dtype,
             "max_argument_tokens": options.max_argument_tokens, "compile_ms": compile_ms,
             "prompt_id_mismatches": {s.name: s.num_prompt_mismatches for s in systems
                                      if hasattr(s, "num_prompt_mismatches")},
             "environment": environment}
    summary = summarize_many(run.records, names, facts=facts)
    summary["wall_s"] = round(time.perf_counter() - started, 1)
    if options.out_dir is not None:
        write(options.out_dir, run.records, summary)
    return summary


def summarize(records: Sequence[dict[str, Any]], systems: Sequence[str], *,
              options: PeersOptions, skipped: dict[str, str], compile_ms: dict[str, float],
              environment: dict[str, Any]) -> dict[str, Any]:
    return {"command": options.command, "systems": list(systems), "skipped": skipped,
            "num_requests": options.num_requests, "num_arguments": options.num_arguments,
            "num_leaves": options.num_leaves, "num_threads": options.num_threads,
            "dtype": options.dtype,
            "max_argument_tokens": options.max_argument_tokens,
            "tables": system_rows(records, systems), "ratios": ratios(system_rows(
                records, systems)), "arguments_by_source": by_source(records, systems),
            "agreement": agreement(records, systems),
            "compile_ms": {k: round(v, 1) for k, v in compile_ms.items()},
            "environment": environment}


def write(out_dir: Path, records: Sequence[dict[str, Any]], summary: dict[str, Any]) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "calls.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    (out_dir / "tables.md").write_text(render(summary))


def render(summary: dict[str, Any]) -> str:
    """The summary's Markdown, for either workload."""
    return markdown_many(summary) if summary.get("workload") == "many" else markdown(summary)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stackroute bench peers",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--workload", default="mixed", choices=WORKLOADS,
                        help="mixed: requests and Seal-Tools argument cases, caches cleared "
                        "once; many: many requests on one catalog in the product's prompt "
                        "order, every cache kept across requests")
    parser.add_argument("--warm", default=WarmOnLoad.ROOT.value,
                        choices=[w.value for w in WarmOnLoad], help="many: what every system "
                        "computes untimed at catalog load (root: the root menu's call)")
    parser.add_argument("--requests", type=int, default=8, help="cache-suite requests")
    parser.add_argument("--arguments", type=int, default=8, help="Seal-Tools argument cases")
    parser.add_argument("--leaves", type=int, default=None, help="tools in the request "
                        f"catalog (default: 16; {MANY_LEAVES} with --workload many)")
    parser.add_argument("--systems", default=",".join(SYSTEMS),
                        help=f"comma-separated, from {', '.join(KNOWN_SYSTEMS)}")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--dtype", default="float32", choices=DTYPES,
                        help="precision of the systems named without @PRECISION")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", default=None, help="model folder or GGUF (default: the "
                        "embedded SmolLM2-135M-Instruct)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--smoke", action="store_true", help="1 request and 1 argument case "
                        f"({SMOKE_REQUESTS} requests with --workload many)")
    parser.add_argument("--max-argument-tokens", type=int, default=MAX_ARGUMENT_TOKENS,
                        help="an argument generation's token budget (default: the router's)")
    parser.add_argument("--max-run-s", type=float, default=None, help="start no item after "
                        "this many seconds of timed run (a busy machine's budget)")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    systems = tuple(s.strip() for s in args.systems.split(",") if s.strip())
    try:
        missing = missing_systems(systems)
    except ValueError as e:
        parser.error(str(e))
    request_only = [n for n in systems if split_system(n)[0] in REQUEST_ONLY]
    if request_only and args.workload != "many":
        parser.error(f"{', '.join(request_only)} routes whole requests on one catalog: it "
                     f"runs with --workload many, not --workload {args.workload}")
    for name, why in missing.items():
        print(f"skipping {name}: {why}")
    smoke_requests = SMOKE_REQUESTS if args.workload == "many" else 1
    options = PeersOptions(num_requests=smoke_requests if args.smoke else args.requests,
                           num_arguments=1 if args.smoke else args.arguments,
                           num_leaves=args.leaves, systems=systems, num_threads=args.threads,
                           dtype=args.dtype,
                           seed=args.seed, model=args.model, out_dir=args.out,
                           max_run_s=args.max_run_s, workload=args.workload,
                           warm=WarmOnLoad(args.warm),
                           max_argument_tokens=args.max_argument_tokens,
                           command=shlex.join(["stackroute", "bench", "peers", *argv]))
    summary = run_peers(options)
    print(render(summary), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
