import json, sys
a = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2]))
def ok(r): return r["success"] and (r["args_success"] or not r["gold"])
aq = {r["id"]: r for r in a["results"]}
n = sum(ok(aq[r["id"]]) for r in b["results"]); m = sum(ok(r) for r in b["results"])
print("exact on the subset", n, "->", m, "of", len(b["results"]))
for s in b["results"]:
    r = aq[s["id"]]
    if ok(r) != ok(s) or r["arguments"] != s["arguments"] or r["called"] != s["called"]:
        print(" ", r["id"], ok(r), "->", ok(s), r["arguments"], "->", s["arguments"], "| gold", r["gold_args"])
