"""The scripts `request_latency.py` runs inside each checkout's worker process (Python source
as text: each worker imports its own checkout's `stackroute`, so nothing here is imported by
the bench itself)."""

# Runs inside each worker: the checkout's own `eval` command, its per-query `run_query`
# wrapped to wait for a go line on stdin and report the wall time on a pipe of its own.
WORKER = r"""
import importlib, json, os, sys, time
from stackroute.server import cli  # what the checkout's `stackroute` sets before torch loads
getattr(cli, "configure_process", lambda: None)()
for name in ("stackroute.bench.evaluate", "stackroute.server.tools.evaluate"):  # old, new
    try:
        evaluation = importlib.import_module(name)
        break
    except ImportError:
        continue
report = os.fdopen(int(os.environ["STACKROUTE_BENCH_REPORT_FD"]), "w", buffering=1)
original = evaluation.run_query

def timed(machine, query, **kwargs):
    report.write(json.dumps({"ready": query.id, "text": query.query}) + "\n")
    if sys.stdin.readline().strip() != "go":
        raise SystemExit("stopped by the parent")
    started = time.perf_counter()
    state = original(machine, query, **kwargs)
    wall_ms = (time.perf_counter() - started) * 1e3
    usage = state.usage.to_dict()
    report.write(json.dumps({"id": query.id, "wall_ms": wall_ms,
                             "called": [c["path"] for c in state.calls],
                             "model_calls": usage.get("model_calls", 0),
                             "forward_passes": usage.get("forward_passes", 0),
                             "generated_tokens": usage.get("generated_tokens", 0)}) + "\n")
    return state

evaluation.run_query = timed
from stackroute.server.cli import main
sys.argv = ["stackroute", "eval", *sys.argv[1:], "--json"]
main()
"""

# Runs inside each worker in `--forced` mode: the checkout's own cache suite, its append-only
# + cache variant only, each item waiting for a go line and reporting the harness's record.
FORCED_WORKER = r"""
import json, os, sys
from stackroute.server import cli  # what the checkout's `stackroute` sets before torch loads
getattr(cli, "configure_process", lambda: None)()
try:  # bench/ in sub-packages (2026-12-04), flat before
    from stackroute.bench.suites import harness, scenarios
except ImportError:
    from stackroute.bench import harness, scenarios
report = os.fdopen(int(os.environ["STACKROUTE_BENCH_REPORT_FD"]), "w", buffering=1)
all_groups = scenarios.Scenario.groups
scenarios.Scenario.groups = lambda self, options: [
    g for g in all_groups(self, options) if g.variant.label == "append-only+cache"]
original = harness._GroupRunner.run

def timed(self, query):
    report.write(json.dumps({"ready": f"{self.group.num_leaves}/{query.id}",
                             "text": query.query, "size": self.group.num_leaves,
                             "query": {"id": query.id, "query": query.query,
                                       "gold": list(query.gold),
                                       "args": None if query.args is None else list(query.args),
                                       "tags": list(query.tags)}}) + "\n")
    if sys.stdin.readline().strip() != "go":
        raise SystemExit("stopped by the parent")
    record = original(self, query)
    m = record["metrics"]
    report.write(json.dumps({"id": f"{self.group.num_leaves}/{query.id}",
                             "status": record["status"], "wall_ms": record["wall_ms"],
                             "called": list(query.gold), "model_calls": m["model_calls"],
                             "forward_passes": m["forward_passes"],
                             "generated_tokens": m["generated_tokens"],
                             "prefill_tokens": m["prefill_tokens"],
                             "routing_latency_ms": m["routing_latency_ms"],
                             "args_success": m["args_success"]}) + "\n")
    return record

harness._GroupRunner.run = timed
from stackroute.server.cli import main
sys.argv = ["stackroute", "bench", "cache", *sys.argv[1:]]
main()
"""

# Runs inside a `--free` worker: the checkout's product defaults (the engine, policy,
# calibration and speculation `stackroute eval` gets with no flags) run each item the parent
# sends, free, on the cache suite's catalog of the item's size. A job line prepares (untimed:
# the catalog, its evidence index), a ready line answers, a go line runs it.
FREE_WORKER = r"""
import json, os, sys, time
from stackroute.server import cli  # what the checkout's `stackroute` sets before torch loads
getattr(cli, "configure_process", lambda: None)()
try:  # bench/ in sub-packages (2026-12-04), flat before
    from stackroute.bench.workloads.generate import generate_suite
except ImportError:
    from stackroute.bench.generate import generate_suite
from stackroute.runtime.catalog import build_tree
from stackroute.server.commands.common import RoutingFlags, make_engine
from stackroute.server.routing.router import build_machine
from stackroute.server.tools.evaluate import Query, run_query
report = os.fdopen(int(os.environ["STACKROUTE_BENCH_REPORT_FD"]), "w", buffering=1)
engine = make_engine("transformers", None, None)
options = RoutingFlags.parse(policy=None, calibration=None, speculation="routes"
                             ).options_for(engine)
machines = {}
for line in sys.stdin:
    job = json.loads(line)
    size = job["size"]
    if size not in machines:
        tree = build_tree(generate_suite("scale-up", num_leaves=size, seed=0).catalog)
        machines[size] = build_machine(tree, engine, options=options)
    query = Query.from_record(job["query"])
    report.write(json.dumps({"ready": job["ready"], "text": query.query}) + "\n")
    if sys.stdin.readline().strip() != "go":
        raise SystemExit("stopped by the parent")
    started = time.perf_counter()
    state = run_query(machines[size], query)
    wall_ms = (time.perf_counter() - started) * 1e3
    usage = state.usage.to_dict()
    called = [c["path"] for c in state.calls]
    report.write(json.dumps({"id": job["ready"], "wall_ms": wall_ms, "called": called,
                             "success": tuple(called) == query.gold,
                             "model_calls": usage.get("model_calls", 0),
                             "forward_passes": usage.get("forward_passes", 0),
                             "generated_tokens": usage.get("generated_tokens", 0)}) + "\n")
"""
