"""Evidence's best leaf and its score, margin for each request of some catalogs."""
import json, sys
import numpy as np
from stackroute.runtime.catalog import load_catalog
from stackroute.server.routing.router import evidence_for_tree

for cat, qs in zip(sys.argv[1::2], sys.argv[2::2]):
    tree = load_catalog(cat)
    src = evidence_for_tree(tree)
    index = src.index
    paths = index.report_paths
    rows = [json.loads(l) for l in open(qs)]
    vecs = src.embedder.embed([r["query"] for r in rows])
    for r, v in zip(rows, vecs):
        ev = index.evidence(v, r["query"])
        s = np.asarray(ev.scores)
        o = np.argsort(-s)
        best = paths[int(o[0])]
        gold = r["gold"][0] if r["gold"] else "-"
        print(f"{r['id']:8s} {'IN ' if r['gold'] else 'OOS'} top={s[o[0]]:.3f} 2nd={s[o[1]]:.3f} {'ok' if best == gold else '  '} {best}")
