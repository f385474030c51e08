"""Leaf dense evidence variants: the full leaf text (shipped), the name and description alone, and mixes."""
import sys
import numpy as np
from stackroute.runtime.catalog import load_catalog
from stackroute.server.tools.evaluate import read_queries
from stackroute.server.routing.router import evidence_for_tree
from stackroute.server.embeddings.embedder import shared_embedder
from stackroute.server.embeddings.leaf_index import _depth_first
from stackroute.server.embeddings.words import name_words
pairs = [l.split() for l in open(sys.argv[1]) if l.strip()]
emb = shared_embedder()
res = {}
for cat, qs, *rest in pairs:
    tree = load_catalog(cat)
    src = evidence_for_tree(tree, emb); ix = src.index
    leaves, _ = _depth_first(tree.root)
    short = emb.embed([f"{name_words(l.name)}: {' '.join(l.description.split())}" for l in leaves])
    queries = [q for q in read_queries(qs) if q.gold and len(q.gold) == 1]
    if rest: queries = queries[:int(rest[0])]
    counts = {}
    for q in queries:
        if q.gold[0] not in ix.paths: continue
        g = ix.paths.index(q.gold[0])
        t = src.reading(q.query); v = emb.embed([t])[0]
        full = ix.vectors @ v; sh = short @ v
        ex = np.full_like(full, -1.0)
        if ix.example_vectors is not None: np.maximum.at(ex, ix.example_rows, ix.example_vectors @ v)
        lex = ix.lexical.scores(t)
        V = {'shipped': np.maximum(full, ex), 'short': np.maximum(sh, ex), 'max': np.maximum(np.maximum(full, sh), ex),
             'mean': np.maximum((full + sh) / 2, ex)}
        for k, d in V.items():
            counts[k] = counts.get(k, 0) + int(np.argmax(.5 * d + .5 * lex) == g)
    res[cat.split('/')[-1]] = (len(queries), counts)
    print(cat.split('/')[-1], len(queries), counts, flush=True)
tot = {}
for n, (m, c) in res.items():
    if n.startswith('seal'): continue
    for k, v in c.items(): tot[k] = tot.get(k, 0) + v
print('catalogs total', tot)
