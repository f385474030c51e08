"""Cold build of the 4,076 Seal-Tools functions as a tools catalog: empty embedding and
leaf-index caches (a temp STACKROUTE_CACHE_DIR), the server's own parts (store, registry,
router pool with the product's router options), timed once; then the cached lookup."""
import json, logging, os, sys, tempfile, time
from pathlib import Path
logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
for n in ("stackroute.server.service.tool_catalogs", "stackroute.server.tools.tree_builder",
          "stackroute.server.service.catalog_registry"):
    logging.getLogger(n).setLevel(logging.INFO)
model_cache = Path("/work/cache/stackroute")
cold = Path(tempfile.mkdtemp(prefix="h4-cold-"))
os.environ["STACKROUTE_CACHE_DIR"] = str(cold)
from stackroute.server.engines.model_store import resolve_model, load_model
from stackroute.server.engines.transformers_engine import TransformersEngine
from stackroute.server.service.services import Services
from stackroute.server.service.tool_catalogs import ToolCatalogs
from stackroute.server.settings import ServerSettings
engine = TransformersEngine(loaded=load_model(resolve_model(None, cache_dir=model_cache), dtype="float32"))
settings = ServerSettings(db=str(cold / "s.db"))
services = Services.open(settings, engine)
flat = json.loads(Path("/work/shared/data/seal-tools/seal-tools.flat.catalog.json").read_text())
tools = [{"type": "function", "function": {"name": l["name"], "description": l.get("description", ""),
          "parameters": l.get("parameters") or {"type": "object", "properties": {}}}} for l in flat["children"]]
catalogs = ToolCatalogs(services.catalogs, max_menu=settings.max_tool_menu, max_entries=4)
t = time.perf_counter(); built, cached = catalogs.get(tools); first_s = time.perf_counter() - t
t = time.perf_counter(); again, cached2 = catalogs.get(tools); second_s = time.perf_counter() - t
stats = built.tree.stats().to_dict()
out = {"num_tools": len(tools), "cold_build_s": round(first_s, 2), "build_ms_recorded": round(built.build_ms, 1),
       "is_built_tree": built.is_built_tree, "second_lookup_ms": round(second_s * 1000, 3), "second_is_cached": cached2,
       "tree": {k: stats[k] for k in ("num_leaves", "num_routers", "depth", "max_menu")},
       "router_options": settings.router_options(engine.info.model).describe()}
print(json.dumps(out))
services.close()
