"""One line per eval --json output: right leaf, exact call, out-of-scope uncalled, model calls
and wall time at the median (in scope)."""
import json
import sys
for f in sys.argv[1:]:
    try:
        d = json.load(open(f))
    except ValueError:
        print(f, "(not finished)")
        continue
    R = d["results"]
    ins = [r for r in R if r["gold"]]
    oos = [r for r in R if not r["gold"]]
    calls = sorted(r["usage"]["model_calls"] for r in ins)
    wall = sorted(r["wall_ms"] for r in ins)
    print(f, f"leaf {sum(r['success'] for r in ins)} exact "
          f"{sum(r['success'] and r['args_success'] for r in ins)} of {len(ins)} | oos uncalled "
          f"{sum(r['success'] for r in oos)} of {len(oos)} | calls p50 {calls[len(calls) // 2]}"
          f" | wall p50 {wall[len(wall) // 2] / 1000:.1f} s")
