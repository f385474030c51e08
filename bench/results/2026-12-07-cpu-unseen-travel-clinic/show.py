import json, sys
d = json.load(open(sys.argv[1]))
print({k: (round(v, 3) if isinstance(v, float) else v) for k, v in d.items() if k not in ("results", "by_tag")})
for r in d["results"]:
    mark = "OK " if r["success"] and (r["args_success"] or not r["gold"]) else "-- "
    print(mark, r["id"], r["query"][:70], "|", r["called"], r["arguments"], "| gold", r["gold_args"] if r["gold"] else "none",
          "| calls", r["usage"]["model_calls"], "asked", r.get("asked_values"))
