"""`stackroute bench peers` at a tiny size with whichever peers are installed: the tables'
structure, and the systems agreeing on a trivially clear menu. A peer whose package is not
installed is skipped with the reason (llama.cpp is a manual run: a source build)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from stackroute.bench.experiments.peers import (
    SYSTEMS,
    PeersOptions,
    build_systems,
    missing_systems,
    run_peers,
)
from stackroute.bench.peers.tables import ratios
from stackroute.bench.peers.workload import CallKind, ModelCall, render_call
from stackroute.bench.workloads.datasets import SEAL_DIR
from stackroute.runtime.messages import Message
from stackroute.runtime.prompt import Prompt

pytestmark = [
    pytest.mark.model,
    # outlines_core's torch kernels use torch.jit.script_method, deprecated in torch 2.13
    pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated"
                               ":DeprecationWarning"),
]

MISSING = missing_systems(SYSTEMS)
TINY_ARGUMENT_TOKENS = 16  # the structure is what is checked; 384 tokens take minutes here
INSTALLED = tuple(s for s in SYSTEMS if s not in MISSING)


@pytest.fixture(scope="module")
def peers_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Any]:
    if not (SEAL_DIR / "seal-tools.catalog.json").is_file():  # as the shared_data fixture does
        pytest.skip(f"shared data not found at {SEAL_DIR}")
    out = tmp_path_factory.mktemp("peers")
    summary = run_peers(PeersOptions(num_requests=1, num_arguments=1, systems=SYSTEMS,
                                     out_dir=out, is_warm_up=False,
                                     max_argument_tokens=TINY_ARGUMENT_TOKENS))
    return summary, out


@pytest.mark.parametrize("system", SYSTEMS)
def test_each_installed_system_has_a_row_in_every_table(
        peers_run: tuple[dict[str, Any], Any], system: str) -> None:
    if system in MISSING:
        pytest.skip(f"{system} not run: {MISSING[system]}")
    summary, _ = peers_run
    # one request of the 16-tool catalog: 2 routing calls down, 2 DONE calls up, 1 arguments
    decision = summary["tables"]["decision"][system]
    assert decision["n"] == 4
    assert decision["p50"] > 0 and decision["p95"] >= decision["p50"]
    assert decision["forward_passes_mean"] >= 1
    arguments = summary["tables"]["arguments"][system]
    assert arguments["n"] == 2  # the request's own and one Seal-Tools case
    assert arguments["valid_json"] + arguments["at_token_cap"] >= 2
    request = summary["tables"]["request"][system]
    assert request["n"] == 1 and request["p50"] > 0
    assert request["prefill_tokens_mean"] > 0
    assert set(summary["arguments_by_source"]) == {"scale-up-16", "seal-tools-dev"}


def test_missing_peers_are_skipped_with_the_reason(peers_run: tuple[dict[str, Any], Any],
                                                   ) -> None:
    summary, _ = peers_run
    assert summary["systems"] == list(INSTALLED)
    assert summary["skipped"] == MISSING
    for reason in MISSING.values():
        assert "not installed" in reason and "pip install" in reason


def test_ratios_name_the_best_peer(peers_run: tuple[dict[str, Any], Any]) -> None:
    summary, _ = peers_run
    if len(INSTALLED) < 2:
        pytest.skip("one system only: no ratio")
    for key in ("decision_p50", "arguments_p50", "request_p50"):
        ratio = summary["ratios"][key]
        assert ratio["best_peer"] in INSTALLED and ratio["best_peer"] != "ours"
        assert ratio["ratio"] == pytest.approx(ratio["ours_ms"] / ratio["best_peer_ms"])


def test_files_hold_every_call_of_every_system(peers_run: tuple[dict[str, Any], Any]) -> None:
    summary, out = peers_run
    records = [json.loads(line) for line in (out / "calls.jsonl").read_text().splitlines()]
    assert len(records) == 6 * len(INSTALLED)  # 5 calls of the request, 1 argument case
    assert {r["system"] for r in records} == set(INSTALLED)
    for r in records:  # an argument answer is whole JSON unless the tiny budget cut it off
        if r["kind"] == "arguments" and r["finish_reason"] != "length":
            assert isinstance(json.loads(r["text"]), dict)
        if r["kind"] == "decision":
            assert r["gold"] is not None and r["forward_passes"] >= 1
    assert json.loads((out / "summary.json").read_text())["tables"] == summary["tables"]
    assert "| system | n | p50 ms |" in (out / "tables.md").read_text()


def test_the_systems_agree_on_a_trivially_clear_menu() -> None:
    from stackroute.server.engines.model_store import load_model, resolve_model
    from stackroute.server.engines.rendering import ChatRenderer

    loaded = load_model(resolve_model(None), dtype="float32", num_threads=2)
    prompt = Prompt((Message("system", "Answer with one option name."),
                     Message("user", "Which one is a fruit? Options: banana, Tuesday, "
                                     "seventeen. The answer is banana.")))
    call: ModelCall = render_call(ChatRenderer(loaded.tokenizer), CallKind.DECISION, prompt,
                                  options=("banana", "Tuesday", "seventeen"), gold="banana")
    systems = build_systems(INSTALLED, lambda dtype: loaded, num_threads=2)
    answers = {}
    for system in systems:
        system.prepare([call])
        answers[system.name] = system.run(call).text
    # the systems must agree; which option a 135M model finds clear is its own affair (it
    # answered "Tuesday" here, every system alike)
    assert set(answers) == set(INSTALLED)
    assert len(set(answers.values())) == 1 and answers["ours"] in call.options, answers


def test_an_unknown_system_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown system\(s\) vllm; known: ours, xgrammar"):
        missing_systems(["ours", "vllm"])


def test_a_system_runs_at_the_precision_its_name_asks() -> None:
    with pytest.raises(ValueError, match=r"unknown precision in ours@int4; known: float32"):
        missing_systems(["ours@int4"])
    assert "xgrammar@bfloat16" not in missing_systems(["xgrammar@bfloat16"])
    tables = {"decision": {"ours": {"p50": 4.0, "p95": 8.0},
                           "ours@bfloat16": {"p50": 2.0, "p95": 4.0},
                           "xgrammar": {"p50": 5.0, "p95": 9.0},
                           "xgrammar@bfloat16": {"p50": 2.5, "p95": 5.0}}}
    found = ratios(tables)
    assert found["decision_p50"]["best_peer"] == "xgrammar@bfloat16"
    assert found["decision_p50"]["ratio"] == 4.0 / 2.5
    assert found["ours@bfloat16 decision_p50"]["ratio"] == 2.0 / 2.5
