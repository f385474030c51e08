"""A tree built from the flat seal-tools catalog vs the dataset's own taxonomy (issue 7).

Builds a tree from `seal-tools.flat.catalog.json` (`build_tree_from_flat`: balanced k-means,
6–12 children per router, routers named from their members' words, or by the model with
`--name-with-model`), then for each tree reports:
- routing with the embedded model, step by step (`server.query_lint`: one constrained choice
  per level, following the model's picks; no argument generation): leaf and top-level
  accuracy, prompt/prefill tokens and calls per query;
- gold-path tokens: the prompts a run that chooses right would send (tokenised, no model), so
  token costs compare even where the model stops early;
- model-free navigability on more queries: descend by embedding cosine to each option's
  description, or to each subtree's leaf centroid (the flat catalog's figure is plain
  nearest-leaf retrieval);
- tree statistics. Gold paths differ between trees, so gold leaves are mapped by leaf name
  (unique in seal-tools).

The dataset's root menu (146 fields, ~300-character descriptions) is 8,472 tokens: beyond the
embedded model's 8,192-token context. So each tree also runs with option descriptions clipped
to `--clip` characters (default 100), which fits.

Run: `stackroute bench build-tree [--limit 10] [--smoke] [--out DIR]`.
Queries: the first `--limit` single-tool dev queries (`--all-tags` for multi-tool ones too:
then any gold leaf reached counts).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from stackroute.bench.engines import add_engine_options, engine_from_args
from stackroute.bench.environment import git_state
from stackroute.bench.workloads.datasets import SEAL_DIR as DATA


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--limit", type=int, default=10, help="dev queries routed per tree")
    parser.add_argument("--smoke", action="store_true", help="5 queries")
    parser.add_argument("--all-tags", action="store_true", help="multi-tool queries too")
    parser.add_argument("--clip", type=int, default=100, help="description chars, clipped runs")
    parser.add_argument("--name-with-model", action="store_true")
    parser.add_argument("--built", type=Path, default=None, help="reuse a built catalog")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (1: on 2 shared cores, 2 threads ran 3x slower)")
    add_engine_options(parser)
    parser.add_argument("--embedding-queries", type=int, default=200,
                        help="queries for the model-free embedding descent")
    parser.add_argument("--out", type=Path, default=Path("bench/out/build_tree"))
    args = parser.parse_args(argv)
    # numpy's BLAS threads spin against each other on small shared machines (one [6, 4076] x
    # [4076, 384] product: 77 ms with its default threads vs 1.3 ms with one, on 2 busy
    # cores); this must be set before numpy loads, hence the imports below.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s",
                        stream=sys.stderr)
    result = run(args)
    _print_table(result)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "build_tree_bench.json").write_text(json.dumps(result, indent=2))
    sys.stdout.write(f"wrote {args.out / 'build_tree_bench.json'}\n")
    return 0


def run(args: argparse.Namespace) -> dict[str, Any]:
    from stackroute.runtime.catalog import build_tree, load_catalog
    from stackroute.server.embeddings.vector_cache import CachedEmbedder
    from stackroute.server.tools.evaluate import read_queries
    from stackroute.server.tools.tree_builder import build_tree_from_flat

    engine = engine_from_args(args, num_threads=args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    build_info: dict[str, Any] = {}
    if args.built is not None:
        built = load_catalog(args.built)
        build_info["catalog"] = str(args.built)
    else:
        flat_doc = json.loads((args.data / "seal-tools.flat.catalog.json").read_text())
        embedder = CachedEmbedder.for_default_model()
        started = time.perf_counter()
        doc = build_tree_from_flat(flat_doc, embedder=embedder, seed=args.seed,
                                   engine=engine if args.name_with_model else None)
        build_info = {"seconds": round(time.perf_counter() - started, 1),
                      "embedded_texts": embedder.num_misses, "cached_texts": embedder.num_hits,
                      "catalog": str(args.out / "seal-tools.built.catalog.json")}
        (args.out / "seal-tools.built.catalog.json").write_text(json.dumps(doc, indent=1))
        built = build_tree(doc)
    original = load_catalog(args.data / "seal-tools.catalog.json")
    limit = 5 if args.smoke else args.limit
    queries = [q for q in read_queries(args.data / "dev.queries.jsonl")
               if args.all_tags or "single-tool" in q.tags][:limit]
    more = [q for q in read_queries(args.data / "dev.queries.jsonl")
            if args.all_tags or "single-tool" in q.tags][:5 if args.smoke else
                                                          args.embedding_queries]
    embedder = CachedEmbedder.for_default_model()
    flat = load_catalog(args.data / "seal-tools.flat.catalog.json")
    rows, descent = [], []
    for label, tree in (("seal-tools taxonomy", original), ("built from flat", built)):
        mapped = remap_gold_by_leaf_name(queries, tree)
        for clip in (None, args.clip):
            row = route_tree(label, tree, engine, mapped, clip=clip)
            row.update(gold_path_tokens(tree, engine, remap_gold_by_leaf_name(more, tree),
                                        clip=clip))
            rows.append(row)
    for label, tree in (("seal-tools taxonomy", original), ("built from flat", built),
                        ("flat (nearest leaf)", flat)):
        descent.append({"tree": label, **embedding_descent(
            tree, embedder, remap_gold_by_leaf_name(more, tree))})
    flat_tokens = gold_path_tokens(flat, engine, remap_gold_by_leaf_name(queries[:1], flat),
                                   clip=None)["gold_path_prompt_tokens_mean"]
    return {
        "rows": rows,
        "flat_menu_prompt_tokens": flat_tokens,  # one call over every leaf (no schemas)
        "embedding_descent": descent,
        "build": build_info,
        "queries": {"file": "dev.queries.jsonl", "num": len(queries),
                    "selection": "first N" + ("" if args.all_tags else " single-tool")},
        "engine": {"model": engine.info.model, "dtype": engine.info.dtype,
                   "max_context_tokens": engine.info.max_context_tokens},
        "namer": "model" if args.name_with_model else "topic words",
        "machine": {"python": sys.version.split()[0], "platform": platform.platform(),
                    "cpus": os.cpu_count()},
        "commit": git_state()["commit"] or "unknown",
    }


def route_tree(label: str, tree: Any, engine: Any, queries: list[Any], *,
               clip: int | None) -> dict[str, Any]:
    from stackroute.runtime.machine import StackMachine
    from stackroute.runtime.prompt import PromptLayout, PromptStyle
    from stackroute.server.routing.options import DraftSource, RouterOptions
    from stackroute.server.routing.router import EngineRouter
    from stackroute.server.tools.query_lint import query_confusion

    style = PromptStyle() if clip is None else PromptStyle(max_description_chars=clip)
    layout = PromptLayout(tree, style)
    plain = RouterOptions(recovery=None, speculation=DraftSource.OFF)
    machine = StackMachine(tree, EngineRouter(engine, plain), layout=layout)
    probe = machine.start(queries[0].query if queries else "")
    root_tokens = engine.count_tokens(layout.routing_prompt(probe))
    started = time.perf_counter()
    report = query_confusion(tree, engine, queries, machine=machine)
    wall_s = time.perf_counter() - started
    stats = tree.stats()
    return {
        "tree": label, "description_chars": style.max_description_chars,
        **report.summary(),
        "wrong_by_level": {str(k): v for k, v in report.wrong_by_level().items()},
        "root_prompt_tokens": root_tokens,
        "wall_s": round(wall_s, 1),
        "depth": stats.depth, "num_routers": stats.num_routers, "max_menu": stats.max_menu,
        "branching_by_level": [dict(b) for b in stats.branching_by_level],
        "errors": sorted({r.error.split(":")[0] for r in report.routes if r.error}),
    }


def gold_path_tokens(tree: Any, engine: Any, queries: list[Any], *,
                     clip: int | None) -> dict[str, Any]:
    """Tokens of the routing prompts along each query's first gold path (no model call: what
    a run that chooses right pays, whatever this model chooses). With the prefix cache, the
    last prompt's length is about what gets prefilled."""
    from stackroute.runtime.machine import StackMachine
    from stackroute.runtime.prompt import PromptLayout, PromptStyle
    from stackroute.runtime.router import ScriptedRouter

    style = PromptStyle() if clip is None else PromptStyle(max_description_chars=clip)
    machine = StackMachine(tree, ScriptedRouter([]), layout=PromptLayout(tree, style))
    totals, lasts = [], []
    for q in queries:
        if not q.gold or q.gold[0] not in tree:
            continue
        path = q.gold[0].split("/")
        sizes = [engine.count_tokens(machine.layout.routing_prompt(
            machine.start(q.query, at="/".join(path[:depth])))) for depth in range(len(path))]
        totals.append(sum(sizes))
        lasts.append(sizes[-1])
    n = max(len(totals), 1)
    return {"gold_path_queries": len(totals),
            "gold_path_prompt_tokens_mean": round(sum(totals) / n, 1),
            "gold_path_last_prompt_tokens_mean": round(sum(lasts) / n, 1)}


def embedding_descent(tree: Any, embedder: Any, queries: list[Any]) -> dict[str, Any]:
    """Model-free navigability: descend by cosine between the query and each option, either
    the option's description (a perfect reader of the menu) or, for a router, the centroid of
    its leaves' descriptions (a perfect reader of the subtree). Leaf accuracy of each."""
    import numpy as np

    nodes = [n for n in tree.nodes() if n.depth > 0]
    vectors = embedder.embed([n.description or n.name for n in nodes])
    by_path = {n.path_str: vectors[i] for i, n in enumerate(nodes)}
    centroid: dict[str, Any] = {}

    def leaf_sum(node: Any) -> Any:
        if node.is_leaf:
            return by_path[node.path_str]
        total = np.sum([leaf_sum(c) for c in node.children], axis=0)
        centroid[node.path_str] = total / max(float(np.linalg.norm(total)), 1e-9)
        return total

    leaf_sum(tree.root)
    qv = embedder.embed([q.query for q in queries])
    hits = {"description": 0, "centroid": 0}
    for q, v in zip(queries, qv, strict=True):
        for mode in hits:
            node = tree.root
            while node.children:
                options = np.stack([by_path[c.path_str] if mode == "description" or c.is_leaf
                                    else centroid[c.path_str] for c in node.children])
                node = node.children[int(np.argmax(options @ v))]
            hits[mode] += node.path_str in q.gold
    n = max(len(queries), 1)
    return {"num_queries": len(queries),
            "description_descent_accuracy": round(hits["description"] / n, 4),
            "centroid_descent_accuracy": round(hits["centroid"] / n, 4)}


def remap_gold_by_leaf_name(queries: list[Any], tree: Any) -> list[Any]:
    """Each gold path replaced by the path of the leaf with the same name in `tree` (a query
    whose gold names a missing or repeated leaf keeps its gold and is skipped as unroutable)."""
    by_name: dict[str, list[str]] = {}
    for leaf in tree.leaves():
        by_name.setdefault(leaf.name, []).append(leaf.path_str)
    out = []
    for q in queries:
        paths = [by_name.get(g.split("/")[-1], []) for g in q.gold]
        is_mapped = all(len(p) == 1 for p in paths)
        out.append(replace(q, gold=tuple(p[0] for p in paths)) if is_mapped else q)
    return out



def _print_table(r: dict[str, Any]) -> None:
    head = ("tree", "desc", "depth", "menu", "leaf acc", "top acc", "prompt tok/q",
            "prefill tok/q", "calls/q", "errors", "root tok", "gold-path tok", "last tok")
    lines = [head]
    for row in r["rows"]:
        lines.append((row["tree"], str(row["description_chars"]), str(row["depth"]),
                      str(row["max_menu"]), f"{row['leaf_accuracy']:.2f}",
                      f"{row['top_level_accuracy']:.2f}", f"{row['prompt_tokens_mean']:.0f}",
                      f"{row['prefill_tokens_mean']:.0f}", f"{row['model_calls_mean']:.1f}",
                      str(row["num_errors"]), str(row["root_prompt_tokens"]),
                      f"{row['gold_path_prompt_tokens_mean']:.0f}",
                      f"{row['gold_path_last_prompt_tokens_mean']:.0f}"))
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    for line in lines:
        sys.stdout.write("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)) + "\n")
    q = r["queries"]
    sys.stdout.write(f"{q['num']} dev queries ({q['selection']}); model {r['engine']['model']}; "
                     f"router names: {r['namer']}\n")
    sys.stdout.write(f"flat catalog: one menu of every leaf, {r['flat_menu_prompt_tokens']:.0f} "
                     "prompt tokens (without schemas)\n")
    for d in r["embedding_descent"]:
        sys.stdout.write(f"embedding descent, {d['tree']} ({d['num_queries']} queries): "
                         f"by option description {d['description_descent_accuracy']:.2f}, "
                         f"by subtree centroid {d['centroid_descent_accuracy']:.2f}\n")


if __name__ == "__main__":
    raise SystemExit(main())
