"""Evidence-only sweep: at each inner menu on a gold path, how often a shortlist would be
shown and how often it holds the gold option (no model calls)."""
import json, sys
from pathlib import Path
from stackroute.runtime.catalog import load_catalog
from stackroute.runtime.tree import PATH_SEP
from stackroute.server.routing.router import evidence_for_tree
from stackroute.server.routing.calibration import read_calibration, CALIBRATION_DIR
from stackroute.server.routing.shortlist import ShortlistOptions, decide
from stackroute.server.tools.evaluate import read_queries
seal = Path('/work/shared/data/seal-tools')
split = sys.argv[1]
tree = load_catalog(seal / 'seal-tools.catalog.json')
ev = evidence_for_tree(tree)
prior = read_calibration(CALIBRATION_DIR / 'SmolLM2-135M-Instruct.Q4_1.json').prior
qs = [q for q in read_queries(seal / f'{split}.queries.jsonl') if 'single-tool' in q.tags]
menus = []  # (depth, scores, gold child, num options)
for q in qs:
    e = ev.for_request(q.query)
    path = tuple(q.gold[0].split(PATH_SEP))
    for d in range(0, len(path) - 1):
        node = tree.node(path[:d])
        scores = {c.name: e.node_score(c.path_str, aggregate=prior.aggregate,
                                       temperature=prior.temperature) for c in node.children}
        menus.append((d, scores, path[d], len(scores)))
out = {"split": split, "num_queries": len(qs), "rows": []}
for depth in sorted({m[0] for m in menus}):
    mine = [m for m in menus if m[0] == depth]
    for k in (1, 2, 3, 5):
        for margin in (0.0, 0.01, 0.02, 0.03, 0.05, 0.08, 0.1, 0.15):
            opts = ShortlistOptions(margin=margin, max_options=k, min_hidden=2, min_depth=0)
            used = hit = hidden = shown_total = 0
            for _, scores, gold, n in mine:
                s = decide(scores, opts)
                if s is None:
                    continue
                used += 1
                hit += gold in s.children
                hidden += n - len(s.children)
            out["rows"].append({"depth": depth, "max_options": k, "margin": margin,
                                "menus": len(mine), "shortlisted": used,
                                "gold_in_shortlist": hit,
                                "mean_hidden": round(hidden / used, 1) if used else 0,
                                "mean_options": round(sum(m[3] for m in mine) / len(mine), 1)})
for r in out["rows"]:
    print(r)
Path(sys.argv[2]).write_text(json.dumps(out, indent=1))
