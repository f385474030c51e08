"""Per-request fusion rules over cached dense and lexical leaf scores."""
import sys, pickle, os
import numpy as np
cache = sys.argv[2]
if os.path.exists(cache):
    data = pickle.load(open(cache, 'rb'))
else:
    from stackroute.runtime.catalog import load_catalog
    from stackroute.server.tools.evaluate import read_queries
    from stackroute.server.routing.router import evidence_for_tree
    from stackroute.server.embeddings.embedder import shared_embedder
    pairs = [l.split() for l in open(sys.argv[1]) if l.strip()]
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
            rows.append((ix.paths.index(q.gold[0]) if q.gold[0] in ix.paths else -1, dense, ix.lexical.scores(t), q.id))
        data.append((os.path.basename(qs) if 'seal' in cat else os.path.basename(cat), rows))
    pickle.dump(data, open(cache, 'wb'))
