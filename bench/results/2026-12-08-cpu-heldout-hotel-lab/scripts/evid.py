"""Evidence top-1 on in-scope requests of catalogs, with and without abbreviations."""
import sys, json
from stackroute.runtime.catalog import load_catalog
from stackroute.server.tools.evaluate import read_queries
from stackroute.server.routing.router import evidence_for_tree
from stackroute.server.embeddings.embedder import shared_embedder
from stackroute.server.embeddings.leaf_index import EvidenceSource
pairs = [l.split() for l in open(sys.argv[1]) if l.strip()]
emb = shared_embedder()
tot = [0, 0, 0]
for cat, qs, *rest in pairs:
    tree = load_catalog(cat)
    src = evidence_for_tree(tree, emb)
    plain = EvidenceSource(src.index, emb)
    queries = [q for q in read_queries(qs) if q.gold and len(q.gold) == 1]
    if rest: queries = queries[:int(rest[0])]
    a = b = 0
    for q in queries:
        p = plain.for_request(q.query).best()[0]; x = src.for_request(q.query).best()[0]
        a += p == q.gold[0]; b += x == q.gold[0]
        if src.reading(q.query) != q.query:
            print(f"  {q.id}: {'+' if x==q.gold[0] else '-'}{'+' if p==q.gold[0] else '-'} {src.reading(q.query)[:120]!r}")
    print(cat.split('/')[-1], len(queries), a, b, flush=True)
    tot[0] += len(queries); tot[1] += a; tot[2] += b
print('total', tot)
