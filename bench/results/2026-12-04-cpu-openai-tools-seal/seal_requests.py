"""Seal-Tools: the 4,076 flat leaves as an OpenAI tools list through the real server."""
import json, os, sys, time, platform, subprocess
sys.path.insert(0, "/work/main/tests/server")
from pathlib import Path
import openai, jsonschema, logging
logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
for n in ("stackroute.server.service.tool_catalogs", "stackroute.server.tools.tree_builder", "stackroute.server.service.catalog_registry"): logging.getLogger(n).setLevel(logging.INFO)
from live_server import serve, server_settings
from stackroute.server.engines.model_store import resolve_model, load_model
from stackroute.server.engines.transformers_engine import TransformersEngine
from stackroute.server.http.app import create_app
cache = Path(os.environ["STACKROUTE_CACHE_DIR"])
engine = TransformersEngine(loaded=load_model(resolve_model(None, cache_dir=cache), dtype="float32"))
flat = json.loads(Path("/work/shared/data/seal-tools/seal-tools.flat.catalog.json").read_text())
tools = [{"type": "function", "function": {"name": l["name"], "description": l.get("description", ""),
          "parameters": l.get("parameters") or {"type": "object", "properties": {}}}} for l in flat["children"]]
queries = [json.loads(l) for l in Path("/work/shared/data/seal-tools/dev.queries.jsonl").read_text().splitlines()[:3]]
out = {"num_tools": len(tools), "body_bytes": len(json.dumps(tools)), "requests": [],
       "commit": subprocess.run(["git", "-C", "/work/main", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip(),
       "machine": f"{platform.machine()} {os.cpu_count()} CPUs, shared VM with 8 helpers busy beside it; OMP_NUM_THREADS=1"}
tmp = Path("/tmp/h4/seal-srv"); tmp.mkdir(exist_ok=True)
with serve(create_app(server_settings(tmp, max_body_bytes=64 << 20), engine=engine)) as url:
    c = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=3000)
    for q in [queries[0], queries[0], queries[1]]:
        t = time.perf_counter()
        try:
          r = c.chat.completions.create(model=c.models.list().data[0].id, messages=[{"role": "user", "content": q["query"]}],
                                      tools=tools, tool_choice="required", max_tokens=20)
        except openai.APIError as e:
          rec = {"query": q["query"], "wall_s": round(time.perf_counter() - t, 2), "error": str(e)[:300]}
          out["requests"].append(rec); print(json.dumps(rec), flush=True); continue
        wall = time.perf_counter() - t
        call = (r.choices[0].message.tool_calls or [None])[0]
        rec = {"query": q["query"], "gold": q.get("gold"), "wall_s": round(wall, 2), "finish_reason": r.choices[0].finish_reason,
               "call": None if call is None else {"name": call.function.name, "arguments": call.function.arguments},
               "usage": r.usage.model_dump(), "tool_routing": r.model_extra.get("tool_routing")}
        if call is not None:
            schema = next(t["function"]["parameters"] for t in tools if t["function"]["name"] == call.function.name)
            try:
                jsonschema.validate(json.loads(call.function.arguments), schema); rec["arguments_valid"] = True
            except jsonschema.ValidationError as e:
                rec["arguments_valid"] = False; rec["invalid"] = str(e)[:200]
        out["requests"].append(rec)
        print(json.dumps(rec), flush=True)
Path("/tmp/h4/seal_result.json").write_text(json.dumps(out, indent=1))
