"""AUC of each check feature, "call" (in-scope, the evidence's first leaf right) vs "stop"
(out of scope), per split and group, from the probe rows of queries.jsonl."""
import json
import sys
from pathlib import Path

here = Path(__file__).parent
out = {}
for split in ("dev", "test", "smollm2-dev", "smollm2-test"):
    rows = [json.loads(x) for x in (here / split / "queries.jsonl").read_text().splitlines()]
    first = {(r["id"]): r for r in rows if r["row"] == "evidence alone"}
    probes = [r for r in rows if r["row"] == "probe" and r.get("verdict")]
    for group in ("all", "seal-removed", "household"):
        mine = [r for r in probes if group == "all" or r["group"] == group]
        stop = [r for r in mine if "out-of-scope" in r["tags"]]
        call = [r for r in mine if "out-of-scope" not in r["tags"] and first[r["id"]]["success"]]
        row = {"n_call": len(call), "n_stop": len(stop)}
        for feature in ("judge", "contrast", "score", "margin"):
            a = [r["verdict"]["features"][feature] for r in call]
            b = [r["verdict"]["features"][feature] for r in stop]
            pairs = sum((x > y) + 0.5 * (x == y) for x in a for y in b)
            row[feature] = round(pairs / (len(a) * len(b)), 3) if a and b else None
        out[f"{split}/{group}"] = row
json.dump(out, sys.stdout, indent=1)
