"""Per-request differences between two gold-leaf priors runs: cmp.py OLD NEW dev,test
(OLD and NEW: folders under seal-priors/, each with one folder per split)."""
import glob
import json
import sys

old_dir, new_dir = sys.argv[1], sys.argv[2]
for s in sys.argv[3].split(","):
    old = json.load(open(glob.glob(f"{old_dir}/{s}/*gold-leaf.json")[0]))
    new = json.load(open(glob.glob(f"{new_dir}/{s}/*gold-leaf.json")[0]))
    oq = {q["id"]: q for q in old["results"]}
    nq = {q["id"]: q for q in new["results"]}
    print(s, old["summary"]["priors"]["exact"], "->", new["summary"]["priors"]["exact"])
    for k in oq:
        a, b = oq[k]["priors"], nq[k]["priors"]
        if a["exact"] != b["exact"] or a["arguments"] != b["arguments"]:
            print(" ", k, a["exact"], "->", b["exact"], "| gold", oq[k]["gold"], "|",
                  a["arguments"], "->", b["arguments"])
