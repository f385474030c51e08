"""Evidence fusion variants: top-1 over in-scope requests, from dense and lexical parts computed once."""
import sys, pickle, os
import numpy as np
from stackroute.runtime.catalog import load_catalog
from stackroute.server.tools.evaluate import read_queries
from stackroute.server.routing.router import evidence_for_tree
from stackroute.server.embeddings.embedder import shared_embedder
pairs = [l.split() for l in open(sys.argv[1]) if l.strip()]
cache = sys.argv[2]
if os.path.exists(cache):
    data = pickle.load(open(cache, 'rb'))
else:
    emb = shared_embedder(); data = []
    for cat, qs, *rest in pairs:
        src = evidence_for_tree(load_catalog(cat), emb); ix = src.index
        queries = [q for q in read_queries(qs) if q.gold and len(q.gold) == 1]
        if rest: queries = queries[:int(rest[0])]
        rows = []
        for q in queries:
            t = src.reading(q.query); v = emb.embed([t])[0]
            dense = ix.vectors @ v
            if ix.example_vectors is not None: np.maximum.at(dense, ix.example_rows, ix.example_vectors @ v)
            rows.append((ix.paths.index(q.gold[0]) if q.gold[0] in ix.paths else -1, dense, ix.lexical.scores(t)))
        data.append((cat.split('/')[-1], rows))
    pickle.dump(data, open(cache, 'wb'))
def top1(f):
    out = []
    for name, rows in data:
        out.append(sum(int(np.argmax(f(d, l)) == g) for g, d, l in rows))
    return out
names = [n for n, _ in data]
print(' '.join(n[:5] for n in names))
variants = {'base .5': lambda d, l: .5*d + .5*l}
for w in (.3, .4, .5, .6):
    variants[f'lex/max w{w}'] = lambda d, l, w=w: (1-w)*d + w*(l/max(l.max(), 1e-6))
for w in (.6, .7):
    variants[f'lin w{w}'] = lambda d, l, w=w: (1-w)*d + w*l
for k in (10, 30, 60):
    variants[f'rrf{k}'] = lambda d, l, k=k: 1/(k+np.argsort(np.argsort(-d))) + 1/(k+np.argsort(np.argsort(-l)))
for name, f in variants.items():
    r = top1(f); print(f'{name:14s}', r[0], sum(r[1:]), r)
