import sys, json
from stackroute.runtime.catalog import load_catalog
from stackroute.server.engines.registry import create_engine
from stackroute.server.routing.arguments import filling as F
from stackroute.server.routing.arguments.meaning import ValueMeaning
from stackroute.server.embeddings.embedder import Embedder
from stackroute.server.routing.options import DraftSource, MissingValues, RouterOptions, ArgumentValues
from stackroute.server.routing.router import build_machine
cat, path, q, mode = sys.argv[1:5]
tree = load_catalog(cat); leaf = tree.get(path); parent = "/".join(path.split("/")[:-1])
engine = create_engine("transformers", model="smollm2-135m")
machine = build_machine(tree, engine, options=RouterOptions(recovery=None, speculation=DraftSource.OFF))
state = machine.start(q, run_id="x", at=parent); request = machine.request_for(state)
f = F.ArgumentFiller(engine, values=ArgumentValues(mode), missing=MissingValues.ASK, meaning=ValueMeaning(Embedder)).fill(request, leaf)
print(f.arguments)
