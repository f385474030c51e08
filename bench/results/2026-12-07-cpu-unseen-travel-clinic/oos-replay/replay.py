"""Replay the 1.5B's shipped check with several root gates on a recorded evidence-leaf probe
(queries.jsonl of `bench out-of-scope --judge-evidence-leaf`): a request is called when the
evidence's best leaf scores at least the gate and the check does not abstain."""
import json, sys
cal = json.load(open("/work/main/server/routing/calibrations/qwen2.5-coder-1.5b-instruct-q4_k_m.json"))
check = cal["abstention"]["options"]
rows = [json.loads(l) for l in open(sys.argv[1])]
ev = {(r["group"], r["id"]): r for r in rows if r["row"] == "evidence alone"}
probe = [r for r in rows if r["row"] == "probe"]
def fit(f): return sum(check.get(k + "_weight", 0.0) * f[k] for k in f) + check["bias"]
for gate in [float(g) for g in sys.argv[2].split(",")]:
    oos = ins = oos_ok = ins_ok = 0
    for r in probe:
        f = r["verdict"]["features"]
        e = ev[(r["group"], r["id"])]
        leaf = r["verdict"]["leaf"]
        called = f["score"] >= gate and fit(f) >= check["threshold"]
        if r["gold"]:
            ins += 1
            ins_ok += called and leaf in r["gold"]
        else:
            oos += 1
            oos_ok += not called
    print(f"gate {gate:.3f}: out of scope -> no call {oos_ok}/{oos} = {oos_ok/oos:.3f}; in-scope success {ins_ok}/{ins} = {ins_ok/ins:.3f}")
