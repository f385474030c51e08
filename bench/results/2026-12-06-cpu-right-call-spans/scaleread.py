import json, sys
recs = json.load(open(sys.argv[1]))
recs = [r for r in recs if r.get("gold")]
print("menus with the gold option:", len(recs), "of", len(json.load(open(sys.argv[1]))))
for s in (0, 0.5, 1, 1.5, 2, 2.5, 3, 4, 6, 100):
    ok = 0; none_ok = none_n = 0
    for r in recs:
        score = {o: r["logp"][o] + s * r["prior"].get(o, 0.0) for o in r["options"]}
        c = max(score, key=score.get)
        hit = c in r["gold"]; ok += hit
        if r["gold"] == ["NONE"]: none_n += 1; none_ok += hit
    print(f"scale {s}: {ok}/{len(recs)} = {ok/len(recs):.3f}   (NONE right {none_ok}/{none_n})")
