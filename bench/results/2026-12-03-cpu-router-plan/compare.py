"""Decision lists before vs after: README run trace, policy-bench queries.jsonl, eval results."""
import json, sys
from pathlib import Path
D = Path(sys.argv[1] if len(sys.argv) > 1 else "/work/h1out")

def trace_decisions(p):
    out = []
    for line in Path(p).read_text().splitlines():
        e = json.loads(line)
        if e["kind"] == "route":
            probs = {k: round(v, 4) for k, v in (e.get("probabilities") or {}).items()}
            out.append((e["path"], e["decision"], json.dumps(e.get("arguments"), sort_keys=True),
                        json.dumps(probs, sort_keys=True)))
    return out

def bench_rows(p):
    out = []
    for line in Path(p).read_text().splitlines():
        r = json.loads(line)
        u = {k: v for k, v in r["usage"].items() if k != "latency_ms"}
        out.append((r["dataset"], r["row"], r["id"], tuple(r["called"]), r["success"],
                    r["args_success"], r["outcome"], json.dumps(u, sort_keys=True)))
    return out

def eval_rows(p):
    data = json.loads(Path(p).read_text())
    rows = [tuple((k, data[k]) for k in ("num_queries", "success", "args_success", "by_tag",
                                          "prompt_tokens_mean", "prefill_tokens_mean",
                                          "model_calls_mean", "format_failures"))]
    for r in data.get("results", []):
        rows.append((r.get("id"), json.dumps(r.get("called")), json.dumps(r.get("arguments"), sort_keys=True),
                     r.get("success"), r.get("args_success")))
    return rows

def show(name, a, b):
    same = a == b
    print(f"{name}: before {len(a)} decisions, after {len(b)}: {'IDENTICAL' if same else 'DIFFERENT'}")
    if not same:
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                print("  first difference at", i, "\n   before", x, "\n   after ", y)
                break
    return same

ok = True
ok &= show("README run (ROUTE events: node, decision, arguments)",
           trace_decisions(D / "before-readme.trace.json"), trace_decisions(D / "after-readme.trace.json"))
for name in ("overlap32", "seal"):
    b, a = D / f"before-{name}/queries.jsonl", D / f"after-{name}/queries.jsonl"
    if b.is_file() and a.is_file():
        before, after = bench_rows(b), bench_rows(a)
        n = min(len(before), len(after))
        ok &= show(f"policy bench {name} (called, success, args, outcome, usage less latency; first {n})",
                   before[:n], after[:n])
for name in ("eval-guided", "eval-plain"):
    b, a = D / f"before-{name}.json", D / f"after-{name}.json"
    if b.is_file() and a.is_file() and b.stat().st_size and a.stat().st_size:
        before, after = eval_rows(b), eval_rows(a)
        if len(before) == 1:  # the `before` commit's eval --json has no per-query results yet
            after = after[:1]
        ok &= show(f"stackroute {name} (aggregates; per query where both list them)", before, after)
print("ALL IDENTICAL" if ok else "SOME DIFFER")
