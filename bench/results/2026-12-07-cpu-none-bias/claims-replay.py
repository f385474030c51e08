"""The requests whose gold-leaf value menus the optional values' claims (00eb6b7) change, from
menus.py's output before (a worktree of the commit before, on PYTHONPATH) and after; and, where
the 1.5B's unbiased choices were recorded on those menus (../2026-12-06-cpu-right-call-spans/
scale-dev.json, none-dev.json), its choice on each before and after (NONE at -3).
argv: before.json after.json"""
import json
import sys

rec = {}
for f in ["../2026-12-06-cpu-right-call-spans/scale-dev.json", "none-dev.json"]:
    for r in json.load(open(f)):
        rec[(r["id"], r["name"])] = r
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
diff = [k for k in a if a[k]["menus"] != b[k]["menus"] or a[k]["arguments"] != b[k]["arguments"]]
print(len(diff), "requests' menus or arguments differ:", " ".join(diff))


def pick(r, options, none_bias=-3.0):
    if any(o not in r["logp"] for o in options):
        return "?"  # an option the recorded menu did not hold
    score = {o: r["logp"][o] + 2 * r["prior"].get(o, 0.0) + (none_bias if o == "NONE" else 0.0)
             for o in options}
    return max(score, key=score.get)


for k in diff:
    if a[k]["arguments"] != b[k]["arguments"]:
        print(" ", k, "stub arguments", a[k]["arguments"], "->", b[k]["arguments"])
    named = {}
    for side, d in (("before", a), ("after", b)):
        names = [c["name"] for c in d[k]["choices"] if c["source"] in ("model", "omitted")]
        named[side] = dict(zip(names, d[k]["menus"]))
    for n in sorted(set(named["before"]) | set(named["after"])):
        r = rec.get((k, n))
        if r is None:
            continue
        before = pick(r, named["before"][n]) if n in named["before"] else "(not asked)"
        after = pick(r, named["after"][n]) if n in named["after"] else "(not asked)"
        if before != after:
            print(" ", k, n, "1.5B replayed:", before, "->", after, "| gold", r.get("gold"))
