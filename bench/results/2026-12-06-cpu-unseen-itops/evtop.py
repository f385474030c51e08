"""Evidence-alone top-1 on Seal-Tools single-tool requests, per split; writes per-request picks."""
import json, sys
import numpy as np
from stackroute.runtime.catalog import load_catalog
from stackroute.server.routing.router import evidence_for_tree
from stackroute.bench.experiments.right_call import SEAL_DIR, SPLITS

tree = load_catalog(SEAL_DIR / "seal-tools.catalog.json")
src = evidence_for_tree(tree)
index = src.index
paths = index.report_paths
out = {}
for split in ("dev", "test", "test-ood"):
    rows = [json.loads(l) for l in open(SEAL_DIR / SPLITS[split])]
    rows = [r for r in rows if len(r["gold"]) == 1]
    vecs = src.embedder.embed([r["query"] for r in rows])
    hits = []
    for r, v in zip(rows, vecs):
        ev = index.evidence(v, r["query"])
        best = paths[int(np.argmax(ev.scores))]
        out[r["id"]] = best
        hits.append(best == r["gold"][0])
    print(f"{split:10s} {np.mean(hits):.4f} ({sum(hits)}/{len(hits)})")
json.dump(out, open(sys.argv[1], "w"), indent=0)
