"""Like enum.py for a catalog and its queries file (gold leaf): the ids whose value menus hold
NONE. argv: catalog queries out."""
import json, sys
from stackroute.runtime.catalog import load_catalog
from stackroute.runtime.usage import Usage
from stackroute.server.engines.base import MenuResult, Generation
from stackroute.server.engines.registry import create_engine
from stackroute.server.routing.arguments import filling as F
from stackroute.server.routing.arguments.meaning import ValueMeaning
from stackroute.server.embeddings.embedder import Embedder
from stackroute.server.routing.options import DraftSource, MissingValues, RouterOptions, ArgumentValues
from stackroute.server.routing.router import build_machine
cat, qf, out = sys.argv[1], sys.argv[2], sys.argv[3]
tree = load_catalog(cat)
rows = [json.loads(l) for l in open(qf) if l.strip()]
rows = [r for r in rows if len(r.get("gold") or []) == 1]
class Stub:
    def __init__(self): self.none = []
    def choose(self, prompt, options, *, option_bias=None):
        b = option_bias or {}
        if "NONE" in options: self.none.append(options)
        c = max(options, key=lambda o: b.get(o, 0.0))
        return MenuResult(choice=c, probabilities={o: 1.0 if o == c else 0.0 for o in options}, margin=0.0, usage=Usage())
    def generate(self, prompt, *, constraint=None, sampling=None):
        return Generation(text="{}", finish_reason="stop", usage=Usage())
engine = create_engine("transformers", model="smollm2-135m")
machine = build_machine(tree, engine, options=RouterOptions(recovery=None, speculation=DraftSource.OFF))
meaning = ValueMeaning(Embedder)
ids = []
for r in rows:
    path = r["gold"][0]; leaf = tree.get(path); parent = "/".join(path.split("/")[:-1])
    state = machine.start(r["query"], run_id=r["id"], at=parent); request = machine.request_for(state)
    stub = Stub()
    F.ArgumentFiller(stub, values=ArgumentValues.MODEL, missing=MissingValues.ASK, meaning=meaning).fill(request, leaf)
    if stub.none: ids.append(r["id"]); print(r["id"], r["query"][:80], stub.none)
print(qf, len(rows), "requests,", len(ids), "with NONE on a menu")
open(out, "w").write("\n".join(ids) + "\n")
