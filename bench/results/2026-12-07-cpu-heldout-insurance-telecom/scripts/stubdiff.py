import json, sys
stub = json.load(open(sys.argv[1])); qs = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
ok = 0
for q in qs:
    if not q["gold"]: continue
    r = stub[q["id"]]; a = r["arguments"] if isinstance(r, dict) and "arguments" in r else r
    g = q["args"][0]
    diff = {k: (g.get(k), a.get(k)) for k in set(g) | set(a) if g.get(k) != a.get(k)}
    ok += not diff
    if diff: print(q["id"], diff)
print("exact at gold leaf", ok)
