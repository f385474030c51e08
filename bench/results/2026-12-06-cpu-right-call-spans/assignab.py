"""A/B at the gold leaf, priors: a required property's candidates lifted by B where the value
means this property more than any other of the leaf (MiniLM), dev single-tool."""
import json, sys, time, os
from dataclasses import replace
import numpy as np
from stackroute.runtime.catalog import load_catalog
from stackroute.server.engines.registry import create_engine
from stackroute.server.routing.arguments import filling as F
from stackroute.server.routing.arguments.meaning import ValueMeaning, property_text
from stackroute.server.embeddings.embedder import Embedder
from stackroute.server.routing.options import DraftSource, MissingValues, RouterOptions, ArgumentValues
from stackroute.server.routing.router import build_machine
from stackroute.server.routing.leaf_arguments import json_object
from stackroute.server.tools.evaluate import arguments_equal, _norm
from stackroute.bench.experiments.right_call import SEAL_DIR, SPLITS
split = sys.argv[1]
tree = load_catalog(SEAL_DIR / "seal-tools.catalog.json")
rows = [json.loads(l) for l in open(SEAL_DIR / SPLITS[split])]
rows = [r for r in rows if len(r["gold"]) == 1 and r.get("args")][:int(os.environ.get("LIMIT", 200))]
engine = create_engine("transformers")
machine = build_machine(tree, engine, options=RouterOptions(recovery=None, speculation=DraftSource.OFF))
meaning = ValueMeaning(Embedder)
orig = F._menus
CFG = {"B": 0.0, "top": 8, "floor": -1.0, "kinds": ("span", "quoted")}
def menus(leaf, order, task):
    out = orig(leaf, order, task)
    if CFG["B"] == 0: return out
    props = (leaf.parameters or {}).get("properties") or {}
    req = set((leaf.parameters or {}).get("required") or ())
    names = list(props)
    if len(names) < 2: return out
    M = meaning._embed([property_text(n, F.schema_of(props[n])) for n in names])
    for n in order:
        if n not in req: continue
        cs = out[n]; pick = [c for c in cs if c.prior >= 0 and c.kind in CFG["kinds"]][:CFG["top"]]
        if not pick: continue
        S = meaning._embed([c.text for c in pick]) @ M.T
        col = names.index(n); lift = {}
        for c, row in zip(pick, S):
            if row.argmax() == col and row[col] >= CFG["floor"]: lift[c.text] = CFG["B"]
        cs = [replace(c, prior=c.prior + lift.get(c.text, 0.0)) for c in cs]
        out[n] = sorted(cs, key=lambda c: -c.prior)
    return out
F._menus = menus
def run(tag):
    res = {}; t0 = time.time()
    for r in rows:
        path, gold = r["gold"][0], r["args"][0]
        leaf = tree.get(path); parent = "/".join(path.split("/")[:-1])
        state = machine.start(r["query"], run_id=r["id"], at=parent); request = machine.request_for(state)
        filled = F.ArgumentFiller(engine, values=ArgumentValues.PRIORS, missing=MissingValues.WRITE, meaning=meaning).fill(request, leaf)
        got = json_object(filled.text) or {}
        res[r["id"]] = (got, bool(arguments_equal(got, dict(gold), leaf.parameters)))
    print(tag, len(res), "exact", round(sum(e for _, e in res.values()) / len(res), 4), "s", round(time.time() - t0), flush=True)
    return res
base = run("base")
for spec in sys.argv[2:]:
    B, floor = (float(x) for x in spec.split(":"))
    CFG["B"], CFG["floor"] = B, floor
    b = run(f"B{B} floor{floor}")
    for k in base:
        if base[k][1] != b[k][1]: print("   ", "+" if b[k][1] else "-", k, base[k][0], "->", b[k][0])
