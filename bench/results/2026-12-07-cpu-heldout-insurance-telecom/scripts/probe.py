import json, sys
from stackroute.server.routing.arguments.candidates import candidates
from stackroute.server.routing.arguments.support import offered
cat, qf, qid, *names = sys.argv[1:]
c = json.load(open(cat))
q = [json.loads(l) for l in open(qf) if f'"{qid}"' in l][0]
path = q["gold"][0].split("/")
n = c
for p in path: n = next(ch for ch in n["children"] if ch["name"] == p)
props = n["parameters"]["properties"]
print(q["query"])
for name in names:
    f = candidates(name, props[name], q["query"], siblings=[s for s in props if s != name])
    print(name, json.dumps(props[name])[:200]); print("   ", [(x.value, round(x.prior, 2), x.kind) for x in f][:6])
    print("   offered", [(x.value) for x in offered(name, props, f, q["query"], set()).candidates][:5])
