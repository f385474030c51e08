"""Per-request differences between two runs of ../2026-12-07-cpu-none-bias/menus.py (the gold
leaf's value menus and arguments where the model chooses, a stub answering each menu by its
priors): cmpstub.py OLD.json NEW.json"""
import json
import sys

old, new = (json.load(open(p)) for p in sys.argv[1:3])
changed = [k for k in old if old[k]["menus"] != new[k]["menus"]
           or old[k]["arguments"] != new[k]["arguments"]]
print(len(old), "requests,", len(changed), "changed")
for k in changed:
    print(" ", k, old[k]["arguments"], "->", new[k]["arguments"])
    print("    menus", old[k]["menus"], "->", new[k]["menus"])
