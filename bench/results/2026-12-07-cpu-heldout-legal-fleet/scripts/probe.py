import json, sys
from stackroute.runtime.tree import Node
from stackroute.server.routing.arguments.menus import ValueMenus
from stackroute.server.routing.arguments.assignment import assigned_picks
cat, qfile = sys.argv[1], sys.argv[2]
c = json.load(open(cat))
qs = {json.loads(l)["id"]: json.loads(l) for l in open(qfile) if l.strip()}
def find(n, path):
    if not path: return n
    for ch in n.get("children", []):
        if ch["name"] == path[0]: return find(ch, path[1:])
for qid in sys.argv[3:]:
    q = qs[qid]; path = q["gold"][0].split("/")
    n = find(c, path); p = n.get("parameters") or {}
    leaf = Node(path[-1], tuple(path[:-1]), n.get("description", ""), parameters=p)
    m = ValueMenus.read(leaf, q["query"])
    print(qid, q["query"]); print("  gold", q["args"][0])
    for k, v in m.by_property.items():
        print("  ", k, json.dumps(p["properties"][k])[:150], [(x.text, round(x.prior, 2)) for x in v[:4]])
