"""Which single-tool requests of a Seal-Tools split put NONE on a value menu at the gold leaf
(the 1.5B's flow: ArgumentValues.MODEL). No model: a stub engine answers each menu with its
biased best option. Prints the ids, one per line, to argv[3]."""
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
from stackroute.bench.experiments.right_call import SEAL_DIR, SPLITS
split, limit, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
tree = load_catalog(SEAL_DIR / "seal-tools.catalog.json")
rows = [json.loads(l) for l in open(SEAL_DIR / SPLITS[split])]
rows = [r for r in rows if len(r["gold"]) == 1 and r.get("args")][:limit]
class Stub:
    def __init__(self): self.none = 0
    def choose(self, prompt, options, *, option_bias=None):
        b = option_bias or {}
        if "NONE" in options: self.none += 1
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
    if stub.none: ids.append(r["id"])
print(split, len(rows), "requests,", len(ids), "with NONE on a menu")
open(out, "w").write("\n".join(ids) + "\n")
