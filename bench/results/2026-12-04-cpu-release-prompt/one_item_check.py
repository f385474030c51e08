"""cache-128 q046 (layout and now called update_late_checkout, before the gold
open_late_checkout): menu-first with every menu in full vs shortlisted, argument values the
model's, to say whether the order or the shortlist changed the decision."""
import json

from stackroute.bench.experiments.shared_prompt import load_suite
from stackroute.runtime.prompt import PromptOrder
from stackroute.server.engines.registry import create_engine
from stackroute.server.routing.calibration import router_options
from stackroute.server.routing.options import ArgumentValues
from stackroute.server.routing.router import build_machine
from stackroute.server.tools.evaluate import run_query

suite = load_suite("cache-128", limit=5)
query = next(q for q in suite.queries if q.id == "q046")
engine = create_engine("transformers", num_threads=1)
for order in (PromptOrder.REQUEST_FIRST, PromptOrder.MENU_FIRST):
    for shortlist in (False, True):
        options = router_options(engine.info.model, prompt_order=order, shortlist=shortlist,
                                 argument_values=ArgumentValues.MODEL)
        state = run_query(build_machine(suite.tree, engine, options=options), query)
        print(json.dumps({"order": order.value, "shortlist": shortlist, "gold": list(query.gold),
                          "called": [c["path"] for c in state.calls],
                          "routes": [(e.path, e.decision, e.detail) for e in state.trace
                                     if e.kind.value == "route"]}, default=str), flush=True)
