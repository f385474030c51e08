"""Which of the 1.5B's first-100 Seal-Tools test requests can route or fill differently now:
evidence best below 0.285 (the old root gate), or the value menus of the leaf the old run
called differ (text, kind, prior) between this checkout and the one on PYTHONPATH first.
Prints per-request value menus as JSON (one run per checkout), compared by a second call."""
import glob, json, sys
from stackroute.runtime.catalog import load_catalog
from stackroute.server.routing.arguments.filling import ValueMenus
from stackroute.bench.experiments.right_call import SEAL_DIR

tree = load_catalog(SEAL_DIR / "seal-tools.catalog.json")
old = json.load(open(glob.glob("/work/main/bench/results/2026-12-06-cpu-unseen-itops/seal-e2e/qwen-test/*guided.json")[0]))
out = {}
for r in old["results"]:
    called = r["routing"]["called"] or r["gold"]
    menus = {}
    for path in called[:1] + r["gold"]:
        node = tree.node(path)
        vm = ValueMenus.read(node, r["query"])
        menus[path] = {k: [(c.text, c.kind, round(c.prior, 3)) for c in v] for k, v in vm.by_property.items()}
    out[r["id"]] = menus
json.dump(out, open(sys.argv[1], "w"))
