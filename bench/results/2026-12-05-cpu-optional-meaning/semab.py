"""A/B at the gold leaf: optional values by words only vs by words and meaning (dev)."""
import json, sys, time
from stackroute.runtime.catalog import load_catalog
from stackroute.server.engines.registry import create_engine
from stackroute.server.routing.arguments import filling as F
from stackroute.server.routing.arguments.meaning import ValueMeaning
from stackroute.server.embeddings.embedder import Embedder
from stackroute.server.routing.options import DraftSource, MissingValues, RouterOptions, ArgumentValues
from stackroute.server.routing.router import build_machine
from stackroute.server.routing.leaf_arguments import json_object
from stackroute.server.tools.evaluate import arguments_equal, _norm
from stackroute.bench.experiments.right_call import SEAL_DIR, SPLITS
split = sys.argv[1]; mode = ArgumentValues(sys.argv[2]); model = sys.argv[3] if len(sys.argv) > 3 else None
th = float(sys.argv[4]) if len(sys.argv) > 4 else 0.4
tree = load_catalog(SEAL_DIR / "seal-tools.catalog.json")
import os
rows = [json.loads(l) for l in open(SEAL_DIR / SPLITS[split])]
if os.environ.get("SINGLE"): rows = [r for r in rows if len(r["gold"]) == 1]
engine = create_engine("transformers", model=model) if model else create_engine("transformers")
machine = build_machine(tree, engine, options=RouterOptions(recovery=None, speculation=DraftSource.OFF))
meaning = ValueMeaning(Embedder, min_similarity=th)
def run(tag, m):
    res = {}; t0 = time.time(); calls = 0
    for r in rows:
        for k, (path, gold) in enumerate(zip(r["gold"], r.get("args") or [])):
            leaf = tree.get(path); parent = "/".join(path.split("/")[:-1])
            state = machine.start(r["query"], run_id=r["id"], at=parent); request = machine.request_for(state)
            filled = F.ArgumentFiller(engine, values=mode, missing=MissingValues.WRITE, meaning=m).fill(request, leaf)
            calls += filled.usage.num_calls if hasattr(filled.usage, "num_calls") else 0
            got = json_object(filled.text) or {}
            props = (leaf.parameters or {}).get("properties", {})
            tp = len({(a, _norm(v, props.get(a, {}))) for a, v in got.items()} & {(a, _norm(v, props.get(a, {}))) for a, v in gold.items()})
            res[f'{r["id"]}#{k}'] = (got, bool(arguments_equal(got, dict(gold), leaf.parameters)), len(r["gold"]) > 1, (len(got), len(gold), tp))
    for multi in (False, True):
        if not any(mu == multi for _, _, mu, _ in res.values()): continue
        v = [e for _, e, mu, _ in res.values() if mu == multi]
        c = [n for _, _, mu, n in res.values() if mu == multi]
        P = sum(x[2] for x in c) / max(1, sum(x[0] for x in c)); R = sum(x[2] for x in c) / max(1, sum(x[1] for x in c))
        print(tag, "multi" if multi else "single", len(v), "exact", round(sum(v) / len(v), 4), "P", round(P, 4), "R", round(R, 4), "F1", round(2*P*R/(P+R), 4), flush=True)
    print(tag, "s", round(time.time() - t0), flush=True)
    return res
a = run("words", None)
for t in (float(x) for x in sys.argv[5].split(",")) if len(sys.argv) > 5 else ():
    meaning.min_similarity = t; run(f"meaning{t}", meaning)
meaning.min_similarity = th
b = run(f"meaning{th}", meaning)
gain = [k for k in a if b[k][1] and not a[k][1]]; loss = [k for k in a if a[k][1] and not b[k][1]]
print("gained", len(gain), "lost", len(loss))
for k in a:
    if a[k][0] != b[k][0]: print(k, "+" if k in gain else "-" if k in loss else " ", "words:", a[k][0], "meaning:", b[k][0])
