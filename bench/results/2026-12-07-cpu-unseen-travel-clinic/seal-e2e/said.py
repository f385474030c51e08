"""Seal-Tools single-tool requests (a split) whose gold leaf has an optional property the new
rule offers without NONE: a boolean said in words or a number labelled at 2.0 or more."""
import json, sys
from stackroute.runtime.catalog import load_catalog
from stackroute.server.routing.arguments.filling import ValueMenus
from stackroute.bench.experiments.right_call import SEAL_DIR, SPLITS

tree = load_catalog(SEAL_DIR / "seal-tools.catalog.json")
rows = [json.loads(l) for l in open(SEAL_DIR / SPLITS[sys.argv[1]])]
rows = [r for r in rows if len(r["gold"]) == 1][: int(sys.argv[2])]
with open(sys.argv[3], "w") as out:
    for r in rows:
        leaf = tree.node(r["gold"][0])
        vm = ValueMenus.read(leaf, r["query"])
        hits = []
        for name in vm.order:
            if name in vm.required:
                continue
            for c in vm.by_property[name]:
                if (c.kind == "boolean" and c.prior > 0) or (c.kind == "number" and c.prior >= 2.0):
                    hits.append((name, c.text))
        if hits:
            gold = r.get("args") or r.get("arguments")
            print(r["id"], hits, "| gold", gold)
            out.write(json.dumps(r) + "\n")
