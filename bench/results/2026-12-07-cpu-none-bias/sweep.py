"""NONE's bias on the recorded value menus: choice(b) = argmax log p(o) + 2 * prior(o) (+ b for
NONE). Counts, over the menus that offer NONE, the right choices where the gold value (or
NONE, where the gold leaves the property out) is on the menu, and the menus where a value
is taken though the gold's value is not on the menu. argv: records.json [ids to keep]"""
import json
import sys

recs = [r for r in json.load(open(sys.argv[1])) if "NONE" in r["options"]]
if len(sys.argv) > 2:
    keep = set(open(sys.argv[2]).read().split())
    recs = [r for r in recs if r["id"] in keep]
print(len(recs), "menus offer NONE;", sum(bool(r.get("gold")) for r in recs),
      "hold the gold value or NONE where the gold leaves the property out")
for b in (0, -0.5, -1, -1.5, -2, -2.5, -3, -3.5, -4, -5, -6):
    right = held = off = 0
    for r in recs:
        score = {o: r["logp"][o] + 2 * r["prior"].get(o, 0.0) + (b if o == "NONE" else 0.0)
                 for o in r["options"]}
        choice = max(score, key=score.get)
        if r.get("gold"):
            held += 1
            right += choice in r["gold"]
        else:
            off += choice != "NONE"
    print(f"bias {b:5}: right {right}/{held}   a value taken where the gold's is not offered: {off}")
for r in recs:
    score = {o: r["logp"][o] + 2 * r["prior"].get(o, 0.0) for o in r["options"]}
    best = max((o for o in r["options"] if o != "NONE"), key=score.get)
    print(f"  {r['id']:28} {r['name']:20} gold {r.get('gold')} | best {best!r} {score[best]:.2f}"
          f" vs NONE {score['NONE']:.2f}")
