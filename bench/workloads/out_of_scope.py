"""The out-of-scope suite (issue 25 item 2): requests no leaf serves, beside in-scope ones, in
separate dev and test splits, each in FORMAT.md's query format with its own catalog(s).

Groups, each routed against its own catalog:
- `seal-removed`: Seal-Tools single-tool requests whose gold tool is removed from the catalog
  with its reviewed substitutes, the remaining tools that would serve the request too
  (`out_of_scope_substitutes.py`): the right answer is no call; the removed tool's other
  siblings, the near misses, stay. Beside them, Seal-Tools requests whose tool is still
  there. Dev items come from `dev.queries.jsonl`, test items from `test.queries.jsonl`; each
  split has its own reduced catalog.
- `services`: the scale-up-32 catalog's clear requests (short, with their values) and its
  own out-of-scope items;
- `household`: the semantic-overlap-32 catalog (dev seed 1, test seed 0) with chit-chat and
  other-domain requests, the generated overlap suites' own out-of-scope items, and the
  suite's in-scope requests. Out-of-scope texts come from disjoint pools: the word banks'
  (`OUT_OF_SCOPE_QUERIES`, `CHATTER`) and this module's, even positions for dev, odd for test.

Deterministic by (split, seed):

>>> a = build_suite("dev", seed=0, num_removed=3, num_seal_in_scope=2, num_household=2,
...                 num_chatter=2)
>>> a.to_files() == build_suite("dev", seed=0, num_removed=3, num_seal_in_scope=2,
...                              num_household=2, num_chatter=2).to_files()
True
"""

from __future__ import annotations

import copy
import json
import random
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from stackroute.bench.workloads.datasets import SEAL_DESCRIPTION_CHARS, SEAL_DIR
from stackroute.bench.workloads.generate import generate_suite
from stackroute.bench.workloads.out_of_scope_substitutes import SUBSTITUTES
from stackroute.bench.workloads.word_banks import CHATTER, OUT_OF_SCOPE_QUERIES

JsonObject = dict[str, Any]
OUT_OF_SCOPE_TAG = "out-of-scope"
HOUSEHOLD_SIZE = 32
SERVICES_SIZE = 32
SPLIT_SEEDS = {"dev": 1, "test": 0}  # the generated suites' dev seed and report seed
OVERLAP_SIZES = (16, 32, 64)  # the generated overlap suites whose out-of-scope items join

# Requests for nothing a tool does, and for another provider's products (a catalog of household
# bills serves none of them). Even positions go to dev, odd to test.
CHIT_CHAT: tuple[str, ...] = (
    "Hi there, how are you doing today?",
    "Thanks, that's all I needed.",
    "Good morning! Hope you had a nice weekend.",
    "You have been really helpful, cheers.",
    "What do you like to do for fun?",
    "Haha, that made my day.",
    "Can you tell me something interesting?",
    "I'm just saying hello, nothing else.",
    "Do you ever get tired of answering questions?",
    "Okay, never mind, forget I asked.",
    "Have a lovely evening!",
    "Who built you, and how old are you?",
)
OTHER_DOMAIN: tuple[str, ...] = (
    "Book me a window seat on the next flight to Lisbon.",
    "Order a large pepperoni pizza for delivery at seven.",
    "Reserve a table for four at an Italian restaurant on Friday.",
    "Play the latest album by Taylor Swift on Spotify.",
    "Find me a used bicycle under 200 euros on a marketplace.",
    "Schedule a haircut for Saturday morning.",
    "Fix the merge conflict in my Git repository.",
    "Check the score of last night's basketball game.",
    "Track my Amazon package with the order number 113-55.",
    "Set an alarm for six thirty tomorrow.",
    "Write a SQL query that lists the ten biggest customers.",
    "Recommend a science fiction novel for a long train ride.",
    "Turn on the living room lights.",
    "What is the weather in Oslo this weekend?",
    "Rent a car at the airport for three days.",
    "Sign me up for a beginners' yoga class.",
)


class Group(StrEnum):
    SEAL_REMOVED = "seal-removed"
    HOUSEHOLD = "household"
    SERVICES = "services"


@dataclass(frozen=True)
class GroupSplit:
    """One catalog and the queries routed against it, in one split."""

    group: Group
    catalog: JsonObject
    queries: list[JsonObject]  # FORMAT.md query objects
    description_chars: int | None  # a clip the catalog's menus need to fit (Seal-Tools)
    metadata: JsonObject


@dataclass(frozen=True)
class OutOfScopeSuite:
    split: str
    seed: int
    groups: tuple[GroupSplit, ...]

    @property
    def stem(self) -> str:
        return f"out-of-scope-{self.split}-seed{self.seed}"

    def to_files(self) -> dict[str, str]:
        """File name -> exact text, as `write_suite` writes it."""
        files: dict[str, str] = {}
        for g in self.groups:
            name = f"{self.stem}-{g.group.value}"
            files[f"{name}.catalog.json"] = json.dumps(g.catalog, ensure_ascii=False) + "\n"
            files[f"{name}.queries.jsonl"] = "".join(
                json.dumps(q, ensure_ascii=False) + "\n" for q in g.queries)
            files[f"{name}.meta.json"] = json.dumps(g.metadata, indent=2) + "\n"
        return files


def _pool(bank: tuple[str, ...], split: str) -> list[str]:
    """The dev (even positions) or test (odd positions) half of a word bank."""
    return list(bank[0 if split == "dev" else 1::2])


def _check_split(split: str) -> None:
    if split not in SPLIT_SEEDS:
        raise ValueError(f"split must be one of {sorted(SPLIT_SEEDS)}, got {split!r}")


def remove_leaves(catalog: JsonObject, paths: set[str]) -> JsonObject:
    """A copy of `catalog` without the leaves at `paths`; a router left with no children goes
    too. A path not in the catalog is an error."""
    out = copy.deepcopy(catalog)
    removed: set[str] = set()

    def prune(node: JsonObject, prefix: str) -> bool:
        """Prune below `node`; True when `node` itself should go."""
        kept = []
        for child in node.get("children", []):
            path = f"{prefix}{child['name']}"
            if "children" in child:
                if not prune(child, path + "/"):
                    kept.append(child)
            elif path in paths:
                removed.add(path)
            else:
                kept.append(child)
        if "children" in node:
            node["children"] = kept
        return "children" in node and not kept

    prune(out, "")
    missing = paths - removed
    if missing:
        raise ValueError(f"leaves not in the catalog: {sorted(missing)[:3]}")
    return out


def seal_group(split: str, *, seed: int, num_removed: int, num_in_scope: int,
               seal_dir: Path = SEAL_DIR) -> GroupSplit:
    """Seal-Tools requests of `split` with their gold tools (and those tools' reviewed
    substitutes) removed, and in-scope ones whose tools stay."""
    _check_split(split)
    catalog = json.loads((seal_dir / "seal-tools.catalog.json").read_text(encoding="utf-8"))
    lines = (seal_dir / f"{split}.queries.jsonl").read_text(encoding="utf-8").splitlines()
    singles = [q for q in (json.loads(x) for x in lines if x.strip())
               if "single-tool" in q.get("tags", []) and len(q["gold"]) == 1]
    rng = random.Random(f"out-of-scope-seal-{split}-{seed}")
    rng.shuffle(singles)
    removed: list[JsonObject] = []
    gone: set[str] = set()
    for q in singles:
        if len(removed) >= num_removed:
            break
        if q["gold"][0] not in gone:
            gone.add(q["gold"][0])
            removed.append(q)
    # a reviewed substitute would serve the request: it goes too (out_of_scope_substitutes.py)
    substitutes = {q["gold"][0]: SUBSTITUTES.get(q["gold"][0], ()) for q in removed}
    unreviewed = sorted(path for path in gone if path not in SUBSTITUTES)
    gone_too = {s for subs in substitutes.values() for s in subs} - gone
    in_scope = [q for q in singles if q["gold"][0] not in gone | gone_too][:num_in_scope]
    queries = [{"id": f"seal-oos-{q['id']}", "query": q["query"], "gold": [], "args": [],
                "tags": [OUT_OF_SCOPE_TAG, "near-miss", "seal-removed"],
                "removed": q["gold"], "substitutes": list(substitutes[q["gold"][0]])}
               for q in removed]
    queries += [{"id": f"seal-in-{q['id']}", "query": q["query"], "gold": q["gold"],
                 "args": q.get("args"), "tags": ["in-scope", "seal-tools"]} for q in in_scope]
    rng.shuffle(queries)
    return GroupSplit(Group.SEAL_REMOVED, remove_leaves(catalog, gone | gone_too), queries,
                      SEAL_DESCRIPTION_CHARS,
                      {"source": f"seal-tools {split}.queries.jsonl", "seed": seed,
                       "removed_leaves": sorted(gone), "removed_substitutes": sorted(gone_too),
                       "unreviewed_leaves": unreviewed, "num_out_of_scope": len(removed),
                       "num_in_scope": len(in_scope)})


def household_group(split: str, *, seed: int, num_in_scope: int,
                    num_chatter: int) -> GroupSplit:
    """Chit-chat, other-domain and the overlap suites' out-of-scope requests, and in-scope ones,
    against the semantic-overlap-32 catalog of the split's seed."""
    _check_split(split)
    suite_seed = SPLIT_SEEDS[split]
    generated = generate_suite("semantic-overlap", num_leaves=HOUSEHOLD_SIZE, seed=suite_seed)
    rng = random.Random(f"out-of-scope-household-{split}-{seed}")
    allowed = set(_pool(OUT_OF_SCOPE_QUERIES, split))
    # The generated overlap suites' own out-of-scope items, from this split's half of the bank.
    suite_oos: list[str] = []
    for size in OVERLAP_SIZES:
        for q in generate_suite("semantic-overlap", num_leaves=size, seed=suite_seed).queries:
            if not q["gold"] and q["query"] in allowed and q["query"] not in suite_oos:
                suite_oos.append(q["query"])
    chatter = _pool(CHIT_CHAT, split) + _pool(CHATTER, split)
    other = _pool(OTHER_DOMAIN, split)
    rng.shuffle(chatter)
    rng.shuffle(other)
    half = num_chatter // 2
    queries: list[JsonObject] = []
    for kind, texts in (("overlap-suite", suite_oos), ("chit-chat", chatter[:half]),
                        ("other-domain", other[:num_chatter - half])):
        queries += [{"id": f"hh-{kind}-{i}", "query": t, "gold": [], "args": [],
                     "tags": [OUT_OF_SCOPE_TAG, kind]} for i, t in enumerate(texts)]
    in_scope = [q for q in generated.queries if q["gold"]]
    rng.shuffle(in_scope)
    queries += [{"id": f"hh-in-{q['id']}", "query": q["query"], "gold": q["gold"],
                 "args": q.get("args"), "tags": ["in-scope", *q.get("tags", [])]}
                for q in in_scope[:num_in_scope]]
    rng.shuffle(queries)
    return GroupSplit(Group.HOUSEHOLD, generated.catalog, queries, None,
                      {"source": f"semantic-overlap-{HOUSEHOLD_SIZE} seed {suite_seed}",
                       "seed": seed, "num_out_of_scope": sum(not q["gold"] for q in queries),
                       "num_in_scope": sum(bool(q["gold"]) for q in queries)})


def services_group(split: str, *, seed: int, num_in_scope: int) -> GroupSplit:
    """The scale-up-32 suite of the split's seed: its clear in-scope requests (short, with
    their values, like a user's) and its own out-of-scope items from this split's half of
    the word bank."""
    _check_split(split)
    suite_seed = SPLIT_SEEDS[split]
    generated = generate_suite("scale-up", num_leaves=SERVICES_SIZE, seed=suite_seed)
    rng = random.Random(f"out-of-scope-services-{split}-{seed}")
    allowed = set(_pool(OUT_OF_SCOPE_QUERIES, split))
    queries: list[JsonObject] = [
        {"id": f"sv-oos-{q['id']}", "query": q["query"], "gold": [], "args": [],
         "tags": [OUT_OF_SCOPE_TAG, "overlap-suite"]}
        for q in generated.queries if not q["gold"] and q["query"] in allowed]
    in_scope = [q for q in generated.queries if q["gold"]]
    rng.shuffle(in_scope)
    queries += [{"id": f"sv-in-{q['id']}", "query": q["query"], "gold": q["gold"],
                 "args": q.get("args"), "tags": ["in-scope", *q.get("tags", [])]}
                for q in in_scope[:num_in_scope]]
    rng.shuffle(queries)
    return GroupSplit(Group.SERVICES, generated.catalog, queries, None,
                      {"source": f"scale-up-{SERVICES_SIZE} seed {suite_seed}", "seed": seed,
                       "num_out_of_scope": sum(not q["gold"] for q in queries),
                       "num_in_scope": sum(bool(q["gold"]) for q in queries)})


def build_suite(split: str, *, seed: int = 0, num_removed: int = 20,
                num_seal_in_scope: int = 10, num_household: int = 10,
                num_chatter: int = 12, num_services: int = 12,
                seal_dir: Path = SEAL_DIR) -> OutOfScopeSuite:
    """The suite's `split` (dev or test): every group."""
    groups = [household_group(split, seed=seed, num_in_scope=num_household,
                              num_chatter=num_chatter)]
    if num_services:
        groups.append(services_group(split, seed=seed, num_in_scope=num_services))
    if num_removed or num_seal_in_scope:
        groups.insert(0, seal_group(split, seed=seed, num_removed=num_removed,
                                    num_in_scope=num_seal_in_scope, seal_dir=seal_dir))
    return OutOfScopeSuite(split, seed, tuple(groups))


def write_suite(suite: OutOfScopeSuite, out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in suite.to_files().items():
        path = out_dir / name
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths
