"""Record the 1.5B's unbiased value choices at the gold leaf (dev single-tool), to read
PRIOR_SCALE offline: choice(s) = argmax log p(o) + s * prior(o). The flow follows scale 2
(the product's), so later menus see the product's earlier answers. argv: split limit out
[ids.txt [ask|write]]: only the requests ids.txt names (../2026-12-07-cpu-none-bias), and what
a missing required value does (write, as this folder's run, unless told)."""
import json, math, sys, os
from stackroute.runtime.catalog import load_catalog
from stackroute.server.engines.registry import create_engine
from stackroute.server.engines.base import MenuResult
from stackroute.server.routing.arguments import filling as F
from stackroute.server.routing.arguments.meaning import ValueMeaning
from stackroute.server.embeddings.embedder import Embedder
from stackroute.server.routing.options import DraftSource, MissingValues, RouterOptions, ArgumentValues
from stackroute.server.routing.router import build_machine
from stackroute.server.tools.evaluate import _norm
from stackroute.bench.experiments.right_call import SEAL_DIR, SPLITS
split, limit, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
tree = load_catalog(SEAL_DIR / "seal-tools.catalog.json")
rows = [json.loads(l) for l in open(SEAL_DIR / SPLITS[split])]
rows = [r for r in rows if len(r["gold"]) == 1 and r.get("args")][:limit]
if len(sys.argv) > 4:
    keep = set(open(sys.argv[4]).read().split())
    rows = [r for r in rows if r["id"] in keep]
missing = MissingValues(sys.argv[5]) if len(sys.argv) > 5 else MissingValues.WRITE
engine = create_engine("transformers", model="qwen2.5-coder-1.5b")
machine = build_machine(tree, engine, options=RouterOptions(recovery=None, speculation=DraftSource.OFF))
meaning = ValueMeaning(Embedder)
CUR = {}
records = []
orig_choose = engine.choose
def choose(prompt, options, *, option_bias=None):
    r = orig_choose(prompt, options)
    bias = option_bias or {}
    score = {o: math.log(max(p, 1e-30)) + bias.get(o, 0.0) for o, p in r.probabilities.items()}
    choice = max(score, key=score.get)
    z = max(score.values()); tot = sum(math.exp(v - z) for v in score.values())
    probs = {o: math.exp(v - z) / tot for o, v in score.items()}
    rec = dict(CUR); rec.update(options=list(options), logp={o: math.log(max(p, 1e-30)) for o, p in r.probabilities.items()},
                                prior={o: bias.get(o, 0.0) / F.PRIOR_SCALE for o in options})
    records.append(rec)
    return MenuResult(choice=choice, probabilities=probs, margin=0.0, usage=r.usage)
engine.choose = choose
orig = F.ArgumentFiller._choose
def _choose(self, conversation, name, found, **kw):
    CUR["name"] = name
    return orig(self, conversation, name, found, **kw)
F.ArgumentFiller._choose = _choose
for i, r in enumerate(rows):
    path, gold = r["gold"][0], r["args"][0]
    leaf = tree.get(path); parent = "/".join(path.split("/")[:-1])
    props = (leaf.parameters or {}).get("properties", {})
    CUR.clear(); CUR["id"] = r["id"]
    n0 = len(records)
    state = machine.start(r["query"], run_id=r["id"], at=parent); request = machine.request_for(state)
    F.ArgumentFiller(engine, values=ArgumentValues.MODEL, missing=missing, meaning=meaning).fill(request, leaf)
    for rec in records[n0:]:
        n = rec["name"]; schema = props.get(n, {})
        if n in gold:
            g = _norm(gold[n], schema)
            rec["gold"] = [o for o in rec["options"] if o != "NONE" and _norm(o, schema) == g]
        else:
            rec["gold"] = ["NONE"] if "NONE" in rec["options"] else []
    print(i, r["id"], len(records), flush=True)
json.dump(records, open(out, "w"))
