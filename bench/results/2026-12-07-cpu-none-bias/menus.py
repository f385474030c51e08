"""Each single-tool request's value menus and arguments at its gold leaf where the model chooses
(ArgumentValues.MODEL), a stub answering each menu with its biased best (no model): which
requests a change to the offering can reach, and (with a last argument, a file) the ids of
those whose menus offer NONE (none-*.txt). argv: split out.json [ids.txt] or catalog queries
out.json [ids.txt]"""
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
args = sys.argv[1:]
if args[0] in SPLITS:
    split, out, ids = args[0], args[1], args[2:]
    tree = load_catalog(SEAL_DIR / "seal-tools.catalog.json")
    rows = [json.loads(l) for l in open(SEAL_DIR / SPLITS[split])]
    rows = [r for r in rows if len(r["gold"]) == 1 and r.get("args")][:200]
else:
    cat, qf, out, ids = args[0], args[1], args[2], args[3:]
    tree = load_catalog(cat)
    rows = [json.loads(l) for l in open(qf) if l.strip()]
    rows = [r for r in rows if len(r.get("gold") or []) == 1]
class Stub:
    def __init__(self): self.menus = []
    def choose(self, prompt, options, *, option_bias=None):
        b = option_bias or {}
        self.menus.append(list(options))
        c = max(options, key=lambda o: b.get(o, 0.0))
        return MenuResult(choice=c, probabilities={o: 1.0 if o == c else 0.0 for o in options}, margin=0.0, usage=Usage())
    def generate(self, prompt, *, constraint=None, sampling=None):
        return Generation(text="{}", finish_reason="stop", usage=Usage())
engine = create_engine("transformers", model="smollm2-135m")
machine = build_machine(tree, engine, options=RouterOptions(recovery=None, speculation=DraftSource.OFF))
meaning = ValueMeaning(Embedder)
res = {}
for r in rows:
    path = r["gold"][0]; leaf = tree.get(path); parent = "/".join(path.split("/")[:-1])
    state = machine.start(r["query"], run_id=r["id"], at=parent); request = machine.request_for(state)
    stub = Stub()
    f = F.ArgumentFiller(stub, values=ArgumentValues.MODEL, missing=MissingValues.ASK, meaning=meaning).fill(request, leaf)
    res[r["id"]] = {"menus": stub.menus, "arguments": f.arguments, "choices": [c.to_dict() for c in f.choices]}
json.dump(res, open(out, "w"))
with_none = [k for k, v in res.items() if any("NONE" in m for m in v["menus"])]
print(len(res), "requests,", len(with_none), "with NONE on a menu")
if ids:
    open(ids[0], "w").write("\n".join(with_none) + "\n")
