"""`stackroute bench out-of-scope`: the suite it routes (dev and test apart, deterministic) and a
smoke run of the command with the real model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from stackroute.bench.workloads.out_of_scope import (
    OUT_OF_SCOPE_TAG,
    build_suite,
    remove_leaves,
    write_suite,
)


def leaves(node: dict, prefix: str = "") -> set[str]:
    out: set[str] = set()
    for child in node.get("children", []):
        path = prefix + child["name"]
        out |= leaves(child, path + "/") if "children" in child else {path}
    return out


def test_dev_and_test_share_no_out_of_scope_text_and_the_removed_tools_are_gone(
        tmp_path: Path) -> None:
    dev = build_suite("dev", num_removed=4, num_seal_in_scope=2, num_household=3)
    test = build_suite("test", num_removed=4, num_seal_in_scope=2, num_household=3)
    texts = {s: {q["query"] for g in suite.groups for q in g.queries if not q["gold"]}
             for s, suite in (("dev", dev), ("test", test))}
    assert texts["dev"] and texts["test"] and not texts["dev"] & texts["test"]
    seal = dev.groups[0]
    removed = set(seal.metadata["removed_leaves"])
    assert len(removed) == 4

    assert not removed & leaves(seal.catalog)
    for q in seal.queries:
        if OUT_OF_SCOPE_TAG in q["tags"]:
            assert q["gold"] == [] and set(q["removed"]) <= removed
        else:
            assert q["gold"][0] in leaves(seal.catalog)
    paths = write_suite(dev, tmp_path)
    assert {p.name for p in paths} >= {f"{dev.stem}-seal-removed.queries.jsonl",
                                       f"{dev.stem}-household.catalog.json"}
    assert dev.to_files() == build_suite("dev", num_removed=4, num_seal_in_scope=2,
                                         num_household=3).to_files()


def test_every_removed_tool_of_the_reported_suites_is_reviewed_and_its_substitutes_go() -> None:
    for split, num_removed in (("dev", 20), ("dev", 60), ("test", 20)):
        seal = build_suite(split, num_removed=num_removed).groups[0]
        meta = seal.metadata
        assert meta["unreviewed_leaves"] == [] and meta["num_out_of_scope"] == num_removed
        gone = set(meta["removed_leaves"]) | set(meta["removed_substitutes"])
        for q in seal.queries:
            if OUT_OF_SCOPE_TAG in q["tags"]:
                assert set(q["substitutes"]) <= gone
            else:
                assert q["gold"][0] not in gone
        assert not gone & leaves(seal.catalog)
    # the reviewed example: the OCR request's two text recognisers go with applyOCR
    dev = build_suite("dev").groups[0]
    ocr = next(q for q in dev.queries
               if q.get("removed") == ["Technology/Image_Processing/applyOCR"])
    assert ocr["substitutes"] == ["Data_Science/Computer_Vision/recognizeText",
                                  "Artificial_Intelligence/Machine_Perception/textRecognition"]
    assert "Data_Science/Computer_Vision/recognizeText" not in leaves(dev.catalog)


def test_removing_an_unknown_leaf_is_an_error() -> None:
    with pytest.raises(ValueError, match="not in the catalog"):
        remove_leaves({"name": "r", "children": [{"name": "a"}]}, {"b"})
    pruned = remove_leaves({"name": "r", "children": [
        {"name": "g", "children": [{"name": "a"}]}, {"name": "b"}]}, {"g/a"})
    assert pruned["children"] == [{"name": "b"}]


@pytest.mark.model
def test_the_smoke_run_judges_the_evidence_leaf_with_no_routing_call_fits_and_reports(
        tmp_path: Path) -> None:
    # Judged at the evidence's first leaf, every request gives the fit a sample, labelled by
    # its gold alone. A routed probe gives one only where routing reaches a leaf, and on the
    # smoke's 4 requests that hung on an out-of-scope request whose evidence margin is 0.004:
    # it reached a leaf when run alone, and in a fresh-clone CI run the fit had one class
    from stackroute.bench.experiments.out_of_scope import main

    out = tmp_path / "dev"
    assert main(["--split", "dev", "--fit", "--judge-evidence-leaf", "--smoke",
                 "--out", str(out)]) == 0
    result = json.loads((out / "results.json").read_text(encoding="utf-8"))
    probe = result["rows"]["probe"]["all"]
    assert probe["num_out_of_scope"] + probe["num_in_scope"] == 4
    assert set(result["replayed"]) == {"router (first leaf)", "router+abstain (replayed)"}
    written = json.loads((out / "calibration.json").read_text(encoding="utf-8"))
    assert written["abstention"]["options"] == result["fitted"]
    rows = [json.loads(x) for x in (out / "queries.jsonl").read_text(
        encoding="utf-8").splitlines()]
    assert {r["row"] for r in rows} == {"probe", "evidence alone"}
    probes = [r for r in rows if r["row"] == "probe"]
    assert len(probes) == 4
    for probe in probes:
        assert probe["called"] == []
        # the judge's question, and the content-free one the first time a leaf is judged
        assert 1 <= probe["model_calls"] <= 2
        assert set(probe["verdict"]["features"]) == {"judge", "contrast", "score", "margin",
                                                     "values", "lead", "named"}
    # the content-free question is asked once per leaf, whatever the request
    num_leaves = len({p["verdict"]["leaf"] for p in probes})
    assert sum(p["model_calls"] for p in probes) == len(probes) + num_leaves


@pytest.mark.model
def test_the_routed_probe_records_each_first_leaf_and_replays_the_shipped_check(
        tmp_path: Path) -> None:
    # The routed probe (no --judge-evidence-leaf): each request routed by the real model, the
    # check's features recorded where routing reaches a leaf, both rows replayed with the
    # shipped check (no fit, so a smoke sample of one kind cannot stop it)
    from stackroute.bench.experiments.out_of_scope import main

    out = tmp_path / "dev"
    assert main(["--split", "dev", "--probe-only", "--smoke", "--out", str(out)]) == 0
    result = json.loads((out / "results.json").read_text(encoding="utf-8"))
    rows = [json.loads(x) for x in (out / "queries.jsonl").read_text(
        encoding="utf-8").splitlines()]
    probes = [r for r in rows if r["row"] == "probe"]
    assert len(probes) == 4 and all(r["error"] is None for r in probes)
    judged = [r for r in probes if r["verdict"] is not None]
    assert judged, "routing reached no leaf on any smoke request"
    for r in judged:
        assert r["called"] == [] and r["verdict"]["abstain"] is True  # the probe stops all
        assert set(r["verdict"]["features"]) == {"judge", "contrast", "score", "margin",
                                                 "values", "lead", "named"}
    assert result["check"]["margin_weight"] > 0  # the shipped check, read back
    assert set(result["replayed"]) == {"router (first leaf)", "router+abstain (replayed)"}
