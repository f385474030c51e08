import json, sys
a = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2]))
def ok(r): return r["success"] and (r["args_success"] or not r["gold"])
print("exact", sum(ok(r) for r in a["results"] if r["gold"]), "->", sum(ok(r) for r in b["results"] if r["gold"]), "of", sum(1 for r in a["results"] if r["gold"]),
      "| oos", sum(ok(r) for r in a["results"] if not r["gold"]), "->", sum(ok(r) for r in b["results"] if not r["gold"]))
bq = {r["id"]: r for r in b["results"]}
for r in a["results"]:
    s = bq[r["id"]]
    if ok(r) != ok(s) or r["arguments"] != s["arguments"] or r["called"] != s["called"]:
        print(" ", r["id"], ok(r), "->", ok(s), r["called"], r["arguments"], "->", s["called"], s["arguments"], "| gold", r["gold_args"])
