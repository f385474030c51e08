"""The benchmark suites of issue 5: for each, the catalogs, the variants compared side by side
and the queries. A suite is a list of `Group`s; a group is one row of a results table (one
catalog size routed one way) and its items are its queries.

Every suite runs teacher-forced along the gold route (`bench/suites/gold.py`): the variants of one
suite see the identical route, and `success` is first-try success.

- scale-up: services catalogs of 16..512 leaves with 800-character schemas; the flat twin
  (every leaf and its full schema in one menu, as the paper's flat router) vs the tree.
- noisy-two-step: two leaves in order, with distractor sentences; flat vs tree.
- semantic-overlap / clean-semantic: the household leaves under overlapping departments /
  exclusive life domains; flat vs tree.
- seal-tools: the real 4,076-tool catalog with its dev queries. Its flat menu is about 1.3M
  characters, far past any small model's context, so the flat baseline is restricted to what
  can fit: the leaves of the fields the gold leaves belong to (an oracle picks the fields, a
  head start the tree does not get). The tree's descriptions are clipped to 120 characters:
  at the default 300 its 146-field root menu alone is 8,473 tokens, past SmolLM2's 8,192.
- cache: the tree's routes with the prefix cache on and off, in the append-only layout and in
  a naive layout that puts a per-call line before the stable text.
- constraint: menu-constrained routing vs the paper's JSON protocol (`{"choice": ...}`)
  generated without a constraint and parsed afterwards.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stackroute.bench.workloads.generate import SUITES, generate_suite
from stackroute.runtime.catalog import build_tree
from stackroute.runtime.errors import InputError
from stackroute.runtime.flat import flatten
from stackroute.runtime.prompt import PromptStyle
from stackroute.runtime.tree import CapabilityTree
from stackroute.server.tools.evaluate import Query

HIERARCHICAL = "hierarchical"
FLAT = "flat"
FLAT_GOLD_FIELDS = "flat-gold-fields"
SEAL_DESCRIPTION_CHARS = 120
SEAL_SMOKE_FIELDS = 8
REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True, kw_only=True)
class Variant:
    """One way of routing: which tree, how the model answers, how prompts are laid out."""

    label: str
    router: str = HIERARCHICAL  # HIERARCHICAL | FLAT | FLAT_GOLD_FIELDS
    policy: str = "constrained"  # "constrained" | "json-unconstrained" (bench/suites/policies.py)
    layout: str = "append-only"  # "append-only" | "volatile-first" | "json-protocol"
    is_cache_enabled: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {"variant": self.label, "router": self.router, "policy": self.policy,
                "layout": self.layout, "is_cache_enabled": self.is_cache_enabled}


@dataclass(frozen=True, kw_only=True)
class Group:
    """The items of one catalog size routed one way."""

    num_leaves: int
    variant: Variant
    queries: tuple[Query, ...]
    tree: CapabilityTree  # what the variant routes over (the flat twin for FLAT)
    style: PromptStyle = field(default_factory=PromptStyle)
    tree_for: Callable[[Query], CapabilityTree] | None = None  # a catalog per query
    is_prepared: bool = True  # compile every menu and schema before the timed items

    @property
    def name(self) -> str:
        return f"n{self.num_leaves}/{self.variant.label}"

    def catalog(self, query: Query) -> CapabilityTree:
        return self.tree if self.tree_for is None else self.tree_for(query)


@dataclass(frozen=True, kw_only=True)
class ScenarioOptions:
    seed: int = 0
    limit: int | None = None  # queries per group
    is_smoke: bool = False
    sizes: tuple[int, ...] | None = None  # override the suite's sizes
    data_dir: Path | None = None  # shared/data (seal-tools); found next to the repo if None


@dataclass(frozen=True)
class Scenario:
    name: str
    summary: str
    sizes: tuple[int, ...]
    smoke_sizes: tuple[int, ...]
    build: Callable[[ScenarioOptions, tuple[int, ...]], list[Group]]

    def groups(self, options: ScenarioOptions) -> list[Group]:
        sizes = options.sizes or (self.smoke_sizes if options.is_smoke else self.sizes)
        return self.build(options, sizes)


SMOKE_LIMIT = 2  # queries per group in a smoke run unless --limit says otherwise

FLAT_VS_TREE = (Variant(label=FLAT, router=FLAT), Variant(label=HIERARCHICAL))
CACHE_VARIANTS = (
    Variant(label="append-only+cache", layout="append-only", is_cache_enabled=True),
    Variant(label="append-only+no-cache", layout="append-only", is_cache_enabled=False),
    Variant(label="volatile-first+cache", layout="volatile-first", is_cache_enabled=True),
    Variant(label="volatile-first+no-cache", layout="volatile-first", is_cache_enabled=False),
)
CONSTRAINT_VARIANTS = (
    Variant(label="menu-constrained"),
    Variant(label="json-unconstrained", policy="json-unconstrained", layout="json-protocol"),
)


def _queries(records: Sequence[dict[str, Any]], limit: int | None) -> tuple[Query, ...]:
    """`limit` queries spread evenly over the file (all when None), in file order."""
    rows = list(records)
    if limit is not None and limit < len(rows):
        rows = [rows[i * len(rows) // limit] for i in range(limit)]
    return tuple(Query(id=str(r["id"]), query=str(r["query"]), gold=tuple(r["gold"]),
                       args=tuple(r["args"]) if r.get("args") is not None else None,
                       tags=tuple(r.get("tags", []))) for r in rows)


def _limit(options: ScenarioOptions) -> int | None:
    return options.limit if options.limit is not None else (
        SMOKE_LIMIT if options.is_smoke else None)


@functools.cache
def _generated_tree(suite: str, num_leaves: int, seed: int) -> tuple[CapabilityTree,
                                                                      CapabilityTree]:
    gen = generate_suite(suite, num_leaves=num_leaves, seed=seed)
    tree = build_tree(gen.catalog)
    return tree, flatten(tree)


def _generated_groups(suite: str, variants: Sequence[Variant]) -> Callable[
        [ScenarioOptions, tuple[int, ...]], list[Group]]:
    def build(options: ScenarioOptions, sizes: tuple[int, ...]) -> list[Group]:
        groups = []
        for n in sizes:
            gen = generate_suite(suite, num_leaves=n, seed=options.seed)
            tree, flat = _generated_tree(suite, n, options.seed)
            queries = _queries(gen.queries, _limit(options))  # type: ignore[arg-type]
            for v in variants:
                is_flat = v.router == FLAT
                groups.append(Group(num_leaves=n, variant=v, queries=queries,
                                    tree=flat if is_flat else tree,
                                    style=PromptStyle(show_schemas=is_flat)))
        return groups
    return build


# -- seal-tools ------------------------------------------------------------------------------

def find_shared_data(data_dir: Path | None = None) -> Path:
    """`shared/data` (with seal-tools/) beside the repository, or `data_dir` if given."""
    candidates = [data_dir] if data_dir is not None else [
        REPO_ROOT.parent / "shared" / "data", Path.cwd().parent / "shared" / "data",
        Path.cwd() / "shared" / "data"]
    for c in candidates:
        if c is not None and (c / "seal-tools" / "seal-tools.catalog.json").is_file():
            return c
    raise InputError(f"seal-tools data not found; looked for seal-tools/seal-tools.catalog.json "
                     f"under {[str(c) for c in candidates]}")


@functools.cache
def _seal_catalog(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _fields_tree(catalog: dict[str, Any], fields: Sequence[str]) -> CapabilityTree:
    keep = set(fields)
    return build_tree({**catalog, "children": [c for c in catalog["children"]
                                               if c["name"] in keep]})


def _seal_tools(options: ScenarioOptions, sizes: tuple[int, ...]) -> list[Group]:
    del sizes  # one real catalog; a smoke run takes a slice of its fields instead
    root = find_shared_data(options.data_dir) / "seal-tools"
    catalog = _seal_catalog(root / "seal-tools.catalog.json")
    with open(root / "dev.queries.jsonl", encoding="utf-8") as f:
        records = [json.loads(line) for line in f if line.strip()]
    queries = _queries(records, _limit(options))
    all_fields = [c["name"] for c in catalog["children"]]
    if options.is_smoke:  # the gold fields of the smoke queries plus the first others
        gold_fields = list(dict.fromkeys(g.split("/")[0] for q in queries for g in q.gold))
        others = [f for f in all_fields if f not in gold_fields]
        tree = _fields_tree(catalog, [f for f in all_fields if f in gold_fields
                                      or f in others[: max(0, SEAL_SMOKE_FIELDS
                                                                - len(gold_fields))]])
    else:
        tree = build_tree(catalog)
    num_leaves = sum(1 for _ in tree.leaves())

    @functools.cache
    def flat_for_fields(fields: tuple[str, ...]) -> CapabilityTree:
        return flatten(_fields_tree(catalog, fields))

    def flat_for(query: Query) -> CapabilityTree:
        return flat_for_fields(tuple(sorted({g.split("/")[0] for g in query.gold})))

    return [
        Group(num_leaves=num_leaves, variant=Variant(label=HIERARCHICAL), queries=queries,
              tree=tree, style=PromptStyle(max_description_chars=SEAL_DESCRIPTION_CHARS),
              is_prepared=options.is_smoke),  # 4,076 schemas compile in about a minute
        Group(num_leaves=num_leaves, variant=Variant(label=FLAT_GOLD_FIELDS,
                                                     router=FLAT_GOLD_FIELDS),
              queries=queries, tree=tree, tree_for=flat_for,
              style=PromptStyle(show_schemas=True)),
    ]


SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    Scenario("scale-up", "clear requests over 16..512 tools with 800-character schemas",
             SUITES["scale-up"].paper_sizes, (8,), _generated_groups("scale-up", FLAT_VS_TREE)),
    Scenario("noisy-two-step", "two tools in order, with distractor sentences",
             SUITES["noisy-two-step"].paper_sizes, (8,),
             _generated_groups("noisy-two-step", FLAT_VS_TREE)),
    Scenario("semantic-overlap", "top-level domains that share vocabulary",
             SUITES["semantic-overlap"].paper_sizes, (16,),
             _generated_groups("semantic-overlap", FLAT_VS_TREE)),
    Scenario("clean-semantic", "the same leaves under mutually exclusive domains",
             SUITES["clean-semantic"].paper_sizes, (16,),
             _generated_groups("clean-semantic", FLAT_VS_TREE)),
    Scenario("seal-tools", "the real Seal-Tools catalog (4,076 tools) with its dev queries",
             (4076,), (SEAL_SMOKE_FIELDS,), _seal_tools),
    Scenario("cache", "the tree's routes with the prefix cache on/off, append-only vs naive "
             "layout", (16, 128, 512), (8,), _generated_groups("scale-up", CACHE_VARIANTS)),
    Scenario("constraint", "menu-constrained routing vs unconstrained JSON parsed afterwards",
             (16, 128), (8,), _generated_groups("scale-up", CONSTRAINT_VARIANTS)),
)}
