"""What `run` and `route` print for people (a route tree and a usage table), that `--json`
keeps the contract's object, and that the long commands draw a progress bar with an ETA on a
terminal (a real pseudo-terminal) and nothing when stdout is not one. The keyword engine of
console_kit stands in for the model (`--engine console_kit:build_keyword_engine`)."""

from __future__ import annotations

import io
import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from console_kit import BANK
from numpy.typing import NDArray
from rich.console import Console
from stackroute.server.cli import app
from stackroute.server.commands.progress import EmbeddingProgress, progress_bar
from typer.testing import CliRunner

TESTS_DIR = Path(__file__).resolve().parent
ENGINE = ["--engine", "console_kit:build_keyword_engine"]
runner = CliRunner()
HIDE_CURSOR = "\x1b[?25l"  # what a live bar writes first


@pytest.fixture(scope="module")
def bank(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "bank.json"
    path.write_text(json.dumps(BANK), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def queries(bank: Path) -> Path:
    path = bank.with_name("queries.jsonl")
    path.write_text("\n".join(json.dumps(q) for q in [
        {"query": "how many funds do I have", "gold": ["payments/balance"]},
        {"query": "do I need an umbrella in Lisbon", "gold": ["weather"],
         "args": [{"city": "Lisbon"}]},
    ]) + "\n", encoding="utf-8")
    return path


def test_run_prints_the_route_as_a_tree_and_a_usage_table(bank: Path) -> None:
    result = runner.invoke(app, ["run", str(bank), "send 5 euros to Asha", "--auto-approve",
                                 *ENGINE])
    assert result.exit_code == 0, result.output
    lines = [line.rstrip() for line in result.stdout.splitlines()]
    assert lines[:8] == [
        "<root>",
        "├── payments  p=0.80",
        '│   ├── send_money {"payee": "Asha", "amount": 5}  p=0.80',
        "│   │   ├── paused: waits for approval",
        "│   │   ├── approved",
        '│   │   └── = {"payee": "Asha", "amount": 5}',
        "│   └── DONE  p=0.80",
        "└── DONE  p=0.80",
    ]
    assert lines[8] == "outcome done · 1 call · 0 format failures"
    assert lines[9] == "model keyword · routing policy plain · speculation routes"
    header = next(i for i, line in enumerate(lines) if "model calls" in line)
    assert lines[header].split() == ["model", "calls", "prompt", "prefilled", "cached",
                                     "generated", "passes", "latency", "ms"]
    # 4 routing calls and one value choice (the payee; the amount is the request's only
    # number); 3.0 ms per call (the keyword engine)
    assert lines[header + 2].split() == ["5", "845", "120", "725", "5", "5", "15.0"]
    assert "{'model_calls'" not in result.stdout  # no Python dict any more


def test_a_paused_run_shows_the_gate(bank: Path) -> None:
    result = runner.invoke(app, ["run", str(bank), "send 5 euros to Asha", *ENGINE])
    assert result.exit_code == 0, result.output
    assert "paused: waits for approval" in result.stdout
    assert ('waiting at a gate: payments/send_money {"payee": "Asha", "amount": 5}'
            in " ".join(result.stdout.split()))


def test_a_value_the_request_does_not_hold_is_marked_before_the_gate(bank: Path) -> None:
    # "send money to Asha" names no amount: with `--missing-values write` the model writes one
    # under the schema (the fallback), and whoever approves the call must see that it was not
    # asked for
    result = runner.invoke(app, ["run", str(bank), "send money to Asha", *ENGINE,
                                 "--missing-values", "write"])
    assert result.exit_code == 0, result.output
    lines = [line.rstrip() for line in result.stdout.splitlines()]
    call = next(i for i, line in enumerate(lines) if "send_money {" in line)
    assert lines[call + 1].endswith("├── written by the model, not taken from the request: amount")
    assert lines[call + 2].endswith("└── paused: waits for approval")
    clear = runner.invoke(app, ["run", str(bank), "send 5 euros to Asha", *ENGINE])
    assert "not taken from the request" not in clear.stdout


def test_a_value_the_request_does_not_hold_is_asked_and_given_with_values(bank: Path) -> None:
    asked = runner.invoke(app, ["run", str(bank), "send money to Asha", *ENGINE])
    assert asked.exit_code == 0, asked.output
    flat = " ".join(asked.stdout.split())
    assert "paused: the request did not say amount" in flat
    assert ("waiting for values: payments/send_money {\"payee\": \"Asha\"} needs amount (run "
            "again with --values '{\"amount\": <number>}')") in flat
    out = json.loads(runner.invoke(app, ["run", str(bank), "send money to Asha", *ENGINE,
                                         "--json"]).stdout)
    assert out["outcome"] == "paused" and out["calls"] == []
    assert out["pending"]["missing_values"] == ["amount"]
    assert out["pending"]["values_schema"]["required"] == ["amount"]

    given = runner.invoke(app, ["run", str(bank), "send money to Asha", *ENGINE, "--json",
                                "--values", '{"amount": 5}', "--auto-approve"])
    assert json.loads(given.stdout)["calls"] == [{
        "path": "payments/send_money", "arguments": {"payee": "Asha", "amount": 5},
        "supplied_values": ["amount"]}]
    for values, words in (('{"amount": "five"}', "do not fit its schema"),
                          ("[5]", "must be a JSON object"), ("{amount", "must be a JSON object")):
        bad = runner.invoke(app, ["run", str(bank), "send money to Asha", *ENGINE,
                                  "--values", values])
        assert bad.exit_code != 0 and words in " ".join(bad.output.split()), bad.output


def test_run_json_is_unchanged(bank: Path) -> None:
    result = runner.invoke(app, ["run", str(bank), "send 5 euros to Asha", "--auto-approve",
                                 "--json", *ENGINE])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)  # one JSON object, nothing else on stdout
    # the contract's keys, plus what was added since: the routing used and the model
    assert set(out) == {"outcome", "calls", "usage", "format_failures", "routing", "model"}
    assert out["model"] == "keyword"
    assert out["outcome"] == "done"
    assert out["calls"] == [{"path": "payments/send_money",
                             "arguments": {"payee": "Asha", "amount": 5}}]
    assert out["usage"]["model_calls"] == 5 and out["usage"]["cached_tokens"] == 725


def test_route_prints_every_option_with_a_bar(bank: Path) -> None:
    result = runner.invoke(app, ["route", str(bank), "send 5 euros to Asha", "--node",
                                 "payments", *ENGINE])
    assert result.exit_code == 0, result.output
    lines = [line.rstrip() for line in result.stdout.splitlines()]
    assert lines[:6] == [
        "payments",
        "├── ▶ send_money      ████████████████░░░░ 0.800",
        '│   └── {"payee": "Asha", "amount": 5}',
        "├──   transfer_money  ██░░░░░░░░░░░░░░░░░░ 0.092",
        "├──   balance         █░░░░░░░░░░░░░░░░░░░ 0.062",
        "└──   BACK            █░░░░░░░░░░░░░░░░░░░ 0.046",
    ]
    assert "model calls" in result.stdout
    as_json = runner.invoke(app, ["route", str(bank), "send 5 euros to Asha", "--node",
                                  "payments", "--json", *ENGINE])
    out = json.loads(as_json.stdout)
    assert set(out) == {"decision", "node", "arguments", "probabilities", "usage", "routing"}
    assert out["decision"] == "send_money"


def test_route_on_a_wide_menu_shows_the_most_probable_options(tmp_path: Path) -> None:
    wide = {"name": "wide", "description": "many tools", "children": [
        {"name": f"tool_{i:02d}", "description": f"tool number {i}"} for i in range(15)]}
    path = tmp_path / "wide.json"
    path.write_text(json.dumps(wide), encoding="utf-8")
    result = runner.invoke(app, ["route", str(path), "nothing applies", *ENGINE])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    shown = [line[4:].lstrip("▶ ").split()[0] for line in lines[1:]
             if line[:4] in ("├── ", "└── ") and "0." in line]
    # DONE was chosen (0.8); the others' probabilities fall with their place in the menu
    assert shown == [*(f"tool_{i:02d}" for i in range(11)), "DONE"]
    assert "… 4 less probable options (--json lists all)" in result.stdout
    out = json.loads(runner.invoke(app, ["route", str(path), "nothing applies", "--json",
                                         *ENGINE]).stdout)
    assert len(out["probabilities"]) == 16


def test_eval_draws_no_bar_when_stdout_is_not_a_terminal(bank: Path, queries: Path) -> None:
    result = runner.invoke(app, ["eval", str(bank), str(queries), *ENGINE])
    assert result.exit_code == 0, result.output
    assert "eta" not in result.output and HIDE_CURSOR not in result.output
    assert "success" in result.stdout


def _in_a_terminal(args: list[str], *, timeout_s: float = 120.0) -> tuple[int, str]:
    """Run `stackroute ARGS` with stdout and stderr on a pseudo-terminal; (exit code, what
    it wrote)."""
    primary, secondary = pty.openpty()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(TESTS_DIR), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        "COLUMNS": "120", "LINES": "40", "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    process = subprocess.Popen([str(Path(sys.executable).with_name("stackroute")), *args],
                               stdin=subprocess.DEVNULL, stdout=secondary, stderr=secondary,
                               env=env)
    os.close(secondary)
    chunks = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([primary], [], [], 0.5)
            if ready:
                try:
                    data = os.read(primary, 65536)
                except OSError:  # the terminal closed: the process is gone
                    break
                if not data:
                    break
                chunks.append(data)
            elif process.poll() is not None:
                break
        code = process.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        os.close(primary)
        if process.poll() is None:
            process.kill()
            process.wait()
    return code, b"".join(chunks).decode("utf-8", errors="replace")


def test_eval_draws_a_bar_with_an_eta_on_a_terminal(bank: Path, queries: Path) -> None:
    code, output = _in_a_terminal(["eval", str(bank), str(queries), *ENGINE])
    assert code == 0, output
    assert HIDE_CURSOR in output and "eval" in output and "eta" in output
    assert "0/2" in output or "1/2" in output or "2/2" in output
    assert "success" in output


def test_the_bar_counts_work_added_on_the_way() -> None:
    stream = io.StringIO()
    console = Console(file=stream, force_terminal=True, width=100)
    with progress_bar("embedding", console=console, is_enabled=True) as bar:
        bar.add_total(3)
        bar.advance(3)
        bar.describe("embedding done")
    assert "3/3" in stream.getvalue() and "eta" in stream.getvalue()
    quiet = io.StringIO()
    with progress_bar("embedding", total=2, console=Console(file=quiet)) as bar:
        bar.advance(2)
    assert quiet.getvalue() == ""


class _Embedder:
    dim = 2

    def __init__(self) -> None:
        self.calls: list[int] = []

    def embed(self, texts: list[str] | tuple[str, ...]) -> NDArray[np.float32]:
        self.calls.append(len(texts))
        return np.array([[len(t), 1.0] for t in texts], dtype=np.float32).reshape(-1, 2)


def test_embedding_progress_embeds_in_chunks_and_keeps_the_order() -> None:
    inner = _Embedder()
    stream = io.StringIO()
    texts = [f"text {'x' * n}" for n in range(150)]
    with progress_bar("embed", console=Console(file=stream, force_terminal=True),
                      is_enabled=True) as bar:
        vectors = EmbeddingProgress(inner, bar).embed(texts)
    assert inner.calls == [64, 64, 22]
    assert vectors.shape == (150, 2)
    assert np.array_equal(vectors, inner.embed(texts))
    assert "150/150" in stream.getvalue()
    assert EmbeddingProgress(inner, bar).embed([]).shape == (0, 2)
