"""The benchmark workload generators: structural properties over every suite and size,
determinism, and exact snapshots that fail on any accidental change of the output."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from stackroute.bench.workloads.catalogs import (
    SCHEMA_MAX_CHARS,
    SCHEMA_MIN_CHARS,
    balanced_widths,
    content_words,
    is_valid_name,
    iter_leaves,
    to_flat_path,
)
from stackroute.bench.workloads.generate import SUITES, GeneratedSuite, generate_suite, write_suite
from stackroute.bench.workloads.synthetic import DEPARTMENTS, LIFE_DOMAINS, household_leaves
from stackroute.bench.workloads.word_banks import CHATTER, plural, shared_words

CASES = [(suite, n) for suite, spec in SUITES.items() for n in spec.sizes]
SMALLEST = [(suite, spec.sizes[0]) for suite, spec in SUITES.items()]


@functools.cache
def generated(suite: str, num_leaves: int, seed: int = 0) -> GeneratedSuite:
    return generate_suite(suite, num_leaves=num_leaves, seed=seed)


def digest(gen: GeneratedSuite) -> str:
    h = hashlib.sha256()
    for name, text in gen.to_files().items():
        h.update(name.encode() + b"\0" + text.encode() + b"\0")
    return h.hexdigest()


def routers(node: dict[str, Any], depth: int = 0) -> list[tuple[int, dict[str, Any]]]:
    found = [(depth, node)]
    for child in node["children"]:
        if "children" in child:
            found.extend(routers(child, depth + 1))
    return found


@functools.cache
def check_schema_text(text: str) -> int:
    Draft202012Validator.check_schema(json.loads(text))
    return len(text)


def in_scope(gen: GeneratedSuite) -> list[dict[str, Any]]:
    return [dict(q) for q in gen.queries if "out-of-scope" not in q["tags"]]


# -- properties of every suite and size ---------------------------------------------------


@pytest.mark.parametrize(("suite", "num_leaves"), CASES)
def test_names_routers_and_leaf_count(suite: str, num_leaves: int) -> None:
    gen = generated(suite, num_leaves)
    for _, router in routers(gen.catalog):
        names = [c["name"] for c in router["children"]]
        assert names, f"empty router {router['name']}"
        assert len(set(names)) == len(names), f"sibling names repeat under {router['name']}"
        assert all(is_valid_name(n) for n in names), names
        assert not {"DONE", "BACK"} & {n.upper() for n in names}
    leaves = list(iter_leaves(gen.catalog))
    assert len(leaves) == num_leaves
    assert len({leaf["name"] for _, leaf in leaves}) == num_leaves  # unique catalog-wide


@pytest.mark.parametrize(("suite", "num_leaves"), CASES)
def test_flat_twin_has_the_same_leaves(suite: str, num_leaves: int) -> None:
    gen = generated(suite, num_leaves)
    flat = gen.flat_catalog
    assert all("children" not in c for c in flat["children"])
    tree_leaves = list(iter_leaves(gen.catalog))
    assert [c["name"] for c in flat["children"]] == [leaf["name"] for _, leaf in tree_leaves]
    for flat_leaf, (path, leaf) in zip(flat["children"], tree_leaves, strict=True):
        assert flat_leaf == {**leaf, "tree_path": path}
        assert to_flat_path(path) == flat_leaf["name"]


@pytest.mark.parametrize(("suite", "num_leaves"), CASES)
def test_schemas_are_valid_and_about_800_characters(suite: str, num_leaves: int) -> None:
    gen = generated(suite, num_leaves)
    for _, leaf in iter_leaves(gen.catalog):
        size = check_schema_text(json.dumps(leaf["parameters"]))
        assert SCHEMA_MIN_CHARS <= size <= SCHEMA_MAX_CHARS
    assert 790 <= gen.metadata["schema_chars"]["mean"] <= 830


@pytest.mark.parametrize(("suite", "num_leaves"), CASES)
def test_gold_paths_exist_and_gold_args_validate(suite: str, num_leaves: int) -> None:
    gen = generated(suite, num_leaves)
    schemas = {path: leaf["parameters"] for path, leaf in iter_leaves(gen.catalog)}
    flat_schemas = {c["name"]: c["parameters"] for c in gen.flat_catalog["children"]}
    for q, flat_q in zip(gen.queries, gen.flat_queries(), strict=True):
        assert list(q) == ["id", "query", "gold", "args", "tags"]
        assert len(q["gold"]) == len(q["args"])
        for path, args in zip(q["gold"], q["args"], strict=True):
            assert path in schemas, path
            validator = Draft202012Validator(schemas[path],
                                             format_checker=Draft202012Validator.FORMAT_CHECKER)
            assert not list(validator.iter_errors(args)), (q["id"], args)
        assert flat_q["gold"] == [to_flat_path(p) for p in q["gold"]]
        assert all(p in flat_schemas for p in flat_q["gold"])


@pytest.mark.parametrize(("suite", "num_leaves"), CASES)
def test_queries_are_numbered_and_include_out_of_scope(suite: str, num_leaves: int) -> None:
    gen = generated(suite, num_leaves)
    ids = [q["id"] for q in gen.queries]
    assert ids == [f"q{i:03d}" for i in range(1, len(ids) + 1)]
    oos = [q for q in gen.queries if "out-of-scope" in q["tags"]]
    assert len(oos) == max(1, len(in_scope(gen)) // 16)
    assert all(q["gold"] == [] and q["args"] == [] for q in oos)
    assert all(q["gold"] for q in in_scope(gen))
    assert len({q["query"] for q in gen.queries}) == len(gen.queries)


@pytest.mark.parametrize(("suite", "num_leaves"), CASES)
def test_runtime_loads_both_catalogs(suite: str, num_leaves: int) -> None:
    from stackroute.runtime.catalog import build_tree

    gen = generated(suite, num_leaves)
    tree = build_tree(gen.catalog)
    assert sum(1 for _ in tree.leaves()) == num_leaves
    assert sum(1 for _ in build_tree(gen.flat_catalog).leaves()) == num_leaves


# -- determinism ----------------------------------------------------------------------------


@pytest.mark.parametrize(("suite", "num_leaves"), SMALLEST)
def test_same_seed_same_bytes_other_seed_other_bytes(suite: str, num_leaves: int,
                                                     tmp_path: Path) -> None:
    a = generate_suite(suite, num_leaves=num_leaves, seed=7)
    b = generate_suite(suite, num_leaves=num_leaves, seed=7)
    assert a.to_files() == b.to_files()
    c = generate_suite(suite, num_leaves=num_leaves, seed=8)
    assert a.catalog != c.catalog or a.queries != c.queries
    paths = write_suite(a, tmp_path)
    assert {p.name: p.read_bytes() for p in paths} == {
        name: text.encode("utf-8") for name, text in a.to_files().items()}
    assert sorted(p.name for p in paths) == sorted([
        f"{suite}-n{num_leaves}-seed7.catalog.json",
        f"{suite}-n{num_leaves}-seed7.flat.catalog.json",
        f"{suite}-n{num_leaves}-seed7.queries.jsonl",
        f"{suite}-n{num_leaves}-seed7.flat.queries.jsonl",
        f"{suite}-n{num_leaves}-seed7.meta.json",
    ])


def test_output_does_not_depend_on_the_hash_seed() -> None:
    script = (
        "import hashlib, sys\n"
        "from stackroute.bench.workloads.generate import generate_suite\n"
        "h = hashlib.sha256()\n"
        "for suite, n in [('scale-up', 32), ('noisy-two-step', 32),"
        " ('semantic-overlap', 32), ('clean-semantic', 32)]:\n"
        "    for name, text in generate_suite(suite, num_leaves=n, seed=1).to_files().items():\n"
        "        h.update(name.encode() + text.encode())\n"
        "print(h.hexdigest())\n"
    )
    digests = set()
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run([sys.executable, "-c", script], env=env, check=True,
                             capture_output=True, text=True)
        digests.add(out.stdout.strip())
    assert len(digests) == 1


def test_largest_size_generates_in_about_a_second() -> None:
    start = time.perf_counter()
    generate_suite("scale-up", num_leaves=512, seed=123)
    assert time.perf_counter() - start < 1.5


# -- suite-specific properties ------------------------------------------------------------

# num_leaves -> (routing calls to a leaf, children per router at each level)
SCALE_UP_SHAPES = {
    8: (2, [2, 4]),
    16: (2, [4, 4]),
    32: (3, [4, 2, 4]),
    64: (3, [4, 4, 4]),
    128: (4, [4, 2, 4, 4]),
    256: (4, [4, 4, 4, 4]),
    512: (5, [4, 2, 4, 4, 4]),
}


@pytest.mark.parametrize(("num_leaves", "shape"), SCALE_UP_SHAPES.items())
def test_scale_up_tree_is_exactly_balanced(num_leaves: int, shape: tuple[int, list[int]]) -> None:
    depth, widths = shape
    gen = generated("scale-up", num_leaves)
    assert gen.metadata["depth"] == depth
    assert gen.metadata["branching_by_level"] == widths
    for level, router in routers(gen.catalog):
        assert len(router["children"]) == widths[level]
    assert {path.count("/") + 1 for path, _ in iter_leaves(gen.catalog)} == {depth}


def test_scale_up_queries_name_one_leaf_each() -> None:
    gen = generated("scale-up", 128)
    queries = in_scope(gen)
    assert len(queries) == 64
    assert all(len(q["gold"]) == 1 and q["tags"] == ["clear"] for q in queries)
    assert len({q["gold"][0] for q in queries}) == 64


def test_router_names_are_words_not_numbers() -> None:
    gen = generated("scale-up", 512)
    for _, router in routers(gen.catalog)[1:]:
        assert not any(ch.isdigit() for ch in router["name"])
        assert len(content_words(router["description"])) >= 3


def test_noisy_two_step_queries_ask_for_two_leaves_among_distractors() -> None:
    gen = generated("noisy-two-step", 64)
    queries = in_scope(gen)
    assert len(queries) == 32
    for q in queries:
        assert len(q["gold"]) == 2 and q["gold"][0] != q["gold"][1]
        assert q["tags"] == ["two-step", "noisy"]
        assert any(sentence in q["query"] for sentence in CHATTER)
    # Mentions of other capabilities: nouns of objects outside the gold paths.
    objects = {path.split("/")[-2].replace("_", " ") for path, _ in iter_leaves(gen.catalog)}
    for q in queries:
        gold_objects = {p.split("/")[-2].replace("_", " ") for p in q["gold"]}
        assert any(o in q["query"] or plural(o) in q["query"] for o in objects - gold_objects)


@pytest.mark.parametrize("num_leaves", [16, 32, 64, 128])
def test_overlap_and_clean_share_leaves_and_queries(num_leaves: int) -> None:
    overlap, clean = generated("semantic-overlap", num_leaves), generated("clean-semantic",
                                                                          num_leaves)

    def strip(catalog: dict[str, Any]) -> list[dict[str, Any]]:
        leaves = [{k: v for k, v in c.items() if k != "tree_path"} for c in catalog["children"]]
        return sorted(leaves, key=lambda c: str(c["name"]))

    assert strip(overlap.flat_catalog) == strip(clean.flat_catalog)
    assert overlap.flat_queries() == clean.flat_queries()
    for a, b in zip(in_scope(overlap), in_scope(clean), strict=True):
        assert a["gold"][0].split("/")[0] != b["gold"][0].split("/")[0]
    assert overlap.metadata["depth"] == clean.metadata["depth"]
    assert max(overlap.metadata["branching_by_level"]) <= 4
    assert max(clean.metadata["branching_by_level"]) <= 4


def test_overlap_departments_share_words_and_clean_domains_do_not() -> None:
    departments = [d.description for d in DEPARTMENTS]
    for i, text in enumerate(departments):
        others = departments[:i] + departments[i + 1:]
        assert shared_words([text, *others]), text
    assert len(shared_words(departments)) >= 5
    domains = [d.description for d in LIFE_DOMAINS]
    assert shared_words(domains) == []
    assert shared_words([d.name for d in LIFE_DOMAINS]) == []
    for domain in LIFE_DOMAINS:
        assert shared_words([c.description for c in domain.categories]) == []
    gen = generated("clean-semantic", 64)
    assert gen.metadata["top_level_shared_words"] == []
    top = [c["description"] for c in generated("semantic-overlap", 64).catalog["children"]]
    assert top == departments


@pytest.mark.parametrize("num_leaves", [16, 32, 64, 128])
def test_boundary_tags_mark_leaves_that_fit_two_departments(num_leaves: int) -> None:
    boundary = {x.leaf.name for x in household_leaves(num_leaves, 0) if x.action.is_boundary}
    for suite in ("semantic-overlap", "clean-semantic"):
        queries = in_scope(generated(suite, num_leaves))
        for q in queries:
            on_boundary = to_flat_path(q["gold"][0]) in boundary
            assert q["tags"] == (["boundary", "overlap"] if on_boundary else ["clear"])
        assert any("boundary" in q["tags"] for q in queries)
        assert any("clear" in q["tags"] for q in queries)


# -- building blocks and errors -------------------------------------------------------------


@pytest.mark.parametrize(("count", "max_branching", "widths"), [
    (2, 4, (2,)), (4, 4, (4,)), (8, 4, (4, 2)), (16, 4, (4, 4)), (32, 4, (4, 2, 4)),
    (128, 4, (4, 2, 4, 4)), (27, 3, (3, 3, 3)), (48, 4, (4, 3, 4)),
])
def test_balanced_widths(count: int, max_branching: int, widths: tuple[int, ...]) -> None:
    assert balanced_widths(count, max_branching=max_branching) == widths


@pytest.mark.parametrize("count", [1, 24, 96])
def test_balanced_widths_rejects_unbalanced_counts(count: int) -> None:
    with pytest.raises(ValueError, match=r"balanced|at least"):
        balanced_widths(count, max_branching=4)


def test_unknown_suite_and_size_are_rejected_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match="scale-up, noisy-two-step"):
        generate_suite("scale", num_leaves=16, seed=0)
    with pytest.raises(ValueError, match=r"\[16, 32, 64, 128\]"):
        generate_suite("semantic-overlap", num_leaves=256, seed=0)
    with pytest.raises(ValueError, match="supports num_leaves"):
        generate_suite("scale-up", num_leaves=100, seed=0)


def test_paper_sizes_are_supported() -> None:
    for spec in SUITES.values():
        assert set(spec.paper_sizes) <= set(spec.sizes)
    assert SUITES["scale-up"].paper_sizes == (16, 32, 64, 128, 256, 512)
    assert SUITES["noisy-two-step"].paper_sizes == (32, 64, 128)


# -- snapshots: update deliberately (and bump GENERATOR_VERSION) when the output changes --


def test_snapshot_first_scale_up_query() -> None:
    gen = generated("scale-up", 16)
    assert dict(gen.queries[0]) == SNAPSHOT_SCALE_UP_Q1
    assert [c["name"] for c in gen.catalog["children"]] == SNAPSHOT_SCALE_UP_TOP


def test_snapshot_first_noisy_and_overlap_queries() -> None:
    assert dict(generated("noisy-two-step", 32).queries[0]) == SNAPSHOT_NOISY_Q1
    assert dict(generated("semantic-overlap", 16).queries[0]) == SNAPSHOT_OVERLAP_Q1
    assert generated("clean-semantic", 16).queries[0]["gold"] == SNAPSHOT_CLEAN_Q1_GOLD


@pytest.mark.parametrize(("suite", "num_leaves"), SMALLEST)
def test_snapshot_digests(suite: str, num_leaves: int) -> None:
    assert digest(generated(suite, num_leaves)) == SNAPSHOT_DIGESTS[suite]


SNAPSHOT_SCALE_UP_Q1: dict[str, Any] = {
    "id": "q001",
    "query": "Please create a store credit for Hana Sato starting 2026-08-07, refund method cash.",
    "gold": ["store_credit/open_store_credit"],
    "args": [{"owner": "Hana Sato", "refund_method": "cash", "start_date": "2026-08-07"}],
    "tags": ["clear"],
}
SNAPSHOT_SCALE_UP_TOP = ["job_opening", "store_credit", "fund_holding", "stock_item"]
SNAPSHOT_NOISY_Q1: dict[str, Any] = {
    "id": "q001",
    "query": "Two things: show up to 69 pending delivery slots created since 2026-09-03, then "
             "show me the details of delivery slot DES-18636. I'm in a bit of a rush, so "
             "thanks in advance. My brother spent the whole weekend complaining about his "
             "duty payment.",
    "gold": ["logistics/delivery_slot/list_delivery_slots",
             "logistics/delivery_slot/get_delivery_slot"],
    "args": [{"status": "pending", "since": "2026-09-03", "limit": 69},
             {"delivery_slot_id": "DES-18636"}],
    "tags": ["two-step", "noisy"],
}
SNAPSHOT_OVERLAP_Q1: dict[str, Any] = {
    "id": "q001",
    "query": "I need you to set up a standing order of 300 EUR for my school fees on day 12 of "
             "each month from 2026-02-21, customer number SCH-82841.",
    "gold": ["transfers/setup_school_fees_standing_order"],
    "args": [{"customer_number": "SCH-82841", "amount": 300, "currency": "EUR",
              "day_of_month": 12, "start_date": "2026-02-21"}],
    "tags": ["boundary", "overlap"],
}
SNAPSHOT_CLEAN_Q1_GOLD = ["family/setup_school_fees_standing_order"]
SNAPSHOT_DIGESTS = {  # sha256 over the written files of each suite's smallest size, seed 0
    "scale-up": "b53511731fc76bb6d8bb413de49b74b941d80083cd8776fc10d1714125b28196",
    "noisy-two-step": "77c4cd6c515233d52cfa7e8aa077c9f1f90ddb2d01addf9a3c81385fe690d798",
    "semantic-overlap": "0ac15a4cbb943edc356b0664d288755759eb49609411ab8f844640f5928357d2",
    "clean-semantic": "3353298f33dd6badabd21740f00a518547d618ee31b9444d0379a257eddbca40",
}
