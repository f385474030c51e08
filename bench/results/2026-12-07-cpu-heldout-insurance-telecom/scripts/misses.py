import json, sys
qs = {}
for f in sys.argv[1:]:
    d = json.load(open(f))
    for q in d["results"]:
        print(f.split("/")[-1].split("-")[1], q["id"], "OK " if q["success"] and q["args_success"] else "   ",
              "leaf-ok" if q["success"] else "LEAF-MISS", end=" ")
        if not q["gold"]:
            print("OOS called" if q["called"] else "OOS ok", q["called"]); continue
        if not q["success"]:
            print(q["gold"], "->", q["called"]); continue
        g = q["gold_args"][0]; a = q["arguments"][0] if q["arguments"] else {}
        diff = {k: (g.get(k), a.get(k)) for k in set(g) | set(a) if g.get(k) != a.get(k)}
        print(diff if diff else "", "asked", q.get("asked_values"))
