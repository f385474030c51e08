import json
from pathlib import Path
from stackroute.runtime.catalog import load_catalog
from stackroute.server.engines.registry import create_engine
from stackroute.server.routing.calibration import router_options
from stackroute.server.routing.router import build_machine
from stackroute.server.tools.evaluate import read_queries, run_query
seal = Path('/work/shared/data/seal-tools')
tree = load_catalog(seal / 'seal-tools.catalog.json')
q = next(q for q in read_queries(seal / 'test.queries.jsonl') if q.id == 'test_in_domain-easy-64')
engine = create_engine("transformers", num_threads=1)
options = router_options(engine.info.model)
print("shortlist", options.shortlist)
state = run_query(build_machine(tree, engine, options=options), q)
print(json.dumps({"id": q.id, "gold": list(q.gold), "called": [c["path"] for c in state.calls],
                  "routes": [(e.path, e.decision, e.detail.get("backtrack")) for e in state.trace if e.kind.value == "route"],
                  "usage": state.usage.to_dict()}, default=str))
