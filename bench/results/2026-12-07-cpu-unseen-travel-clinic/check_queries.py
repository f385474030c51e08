import json, sys
from jsonschema import Draft202012Validator, FormatChecker
ok = True
for name in ["travel", "clinic"]:
    cat = json.load(open(f"{name}.catalog.json"))
    leaves = {}
    import re
    def walk(node, prefix):
        names = [c["name"] for c in node.get("children", [])]
        assert len(names) == len(set(names)), names
        for c in node.get("children", []):
            assert re.fullmatch(r"[A-Za-z][A-Za-z0-9_\-]*", c["name"])
            p = prefix + [c["name"]]
            if "children" in c: walk(c, p)
            else:
                Draft202012Validator.check_schema(c.get("parameters", {}))
                leaves["/".join(p)] = c
    walk(cat, [])
    groups = cat["children"]
    print(name, "groups", len(groups), [len(g["children"]) for g in groups], "leaves", len(leaves))
    qs = [json.loads(l) for l in open(f"{name}.queries.jsonl")]
    ids = [q["id"] for q in qs]; assert len(ids) == len(set(ids)) == 21
    covered = set(); nin = nout = 0
    for q in qs:
        assert len(q["gold"]) == len(q["args"])
        if not q["gold"]: nout += 1
        else: nin += 1
        for g, a in zip(q["gold"], q["args"]):
            if g not in leaves: print("MISSING", q["id"], g); ok = False; continue
            covered.add(g)
            sch = leaves[g].get("parameters", {})
            errs = list(Draft202012Validator(sch, format_checker=FormatChecker()).iter_errors(a))
            extra = set(a) - set(sch.get("properties", {}))
            if errs or extra: print("BAD", q["id"], [e.message for e in errs], extra); ok = False
    print(" in-scope", nin, "out", nout, "uncovered leaves", set(leaves) - covered)
print("OK" if ok else "FAIL")
