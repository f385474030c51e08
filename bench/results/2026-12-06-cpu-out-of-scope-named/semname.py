import json, re, sys
import numpy as np
from stackroute.server.embeddings.lexical import name_share, tokens, _ACRONYM, NAME_PREFIX
from stackroute.server.routing.router import default_embedder
from stackroute.server.routing.abstention import AbstentionFeatures
from stackroute.server.tools.abstention_fit import Sample, choose_features
from stackroute.server.tools.abstention_calibration import label
emb = default_embedder()
cache = {}
def vec(words):
    new = [w for w in words if w not in cache]
    if new:
        for w, v in zip(new, emb.embed(new)): cache[w] = v / np.linalg.norm(v)
    return np.stack([cache[w] for w in words])
GENERIC = {"get", "fetch", "retrieve", "list", "show", "find", "search", "query", "lookup", "read", "view", "check"}
def soft(name, text, tau=None, drop_generic=False):
    named = [w for w in dict.fromkeys(tokens(_ACRONYM.sub(" ", name))) if len(w) > 2]
    if drop_generic and len(named) > 1 and named[0] in GENERIC: named = named[1:]
    if not named: return 1.0
    said = [w for w in dict.fromkeys(tokens(text)) if len(w) > 2]
    if not said: return 0.0
    sims = vec(named) @ vec(said).T
    out = []
    for i, n in enumerate(named):
        if any(w == n or (len(n) > 3 and w.startswith(n[:NAME_PREFIX])) for w in said): out.append(1.0)
        else:
            s = float(sims[i].max()); out.append(s if tau is None else float(s >= tau))
    return sum(out) / len(out)
variants = {
  'lexical': lambda n, t: name_share(n, t),
  'lexical-nogeneric': lambda n, t: soft(n, t, tau=9, drop_generic=True),
  'soft': lambda n, t: soft(n, t),
  'soft-nogeneric': lambda n, t: soft(n, t, drop_generic=True),
  'tau0.5': lambda n, t: soft(n, t, tau=0.5),
  'tau0.6': lambda n, t: soft(n, t, tau=0.6),
  'tau0.6-nogeneric': lambda n, t: soft(n, t, tau=0.6, drop_generic=True),
}
# usage: python semname.py <probe queries.jsonl> <candidate feature subsets as JSON>
path, cands = sys.argv[1], [tuple(c) for c in json.loads(sys.argv[2])]
rows = [json.loads(l) for l in open(path)]
n_in = sum(1 for r in rows if r['row'] == 'probe' and r['gold'])
for name, fn in variants.items():
    samples = []
    for r in rows:
        if r['row'] != 'probe' or not r['verdict']: continue
        f = dict(r['verdict']['features']); f['named'] = fn(r['verdict']['leaf'].split('/')[-1], r['query'])
        samples.append(Sample(AbstentionFeatures(**f), label(r['verdict']['leaf'], r['gold'])))
    _, res = choose_features(samples, max_call_loss=0.02, num_in_scope=n_in, candidates=cands)
    print(name, ' | '.join(f"{'+'.join(x.features)} {x.out_of_scope_stopped}/{x.successes_stopped}" for x in res[:3]), flush=True)
