"""`stackroute lint --no-overlaps` and `stackroute trace` (the runtime's commands; no model
needed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from stackroute.runtime.governance import Limits
from stackroute.runtime.machine import StackMachine
from stackroute.runtime.router import ScriptedRouter
from stackroute.runtime.trace import format_tree, write_jsonl
from stackroute.server.cli import app
from typer.testing import CliRunner

REPO_ROOT = Path(__file__).resolve().parents[1]
SEAL_TOOLS = REPO_ROOT.parent / "shared" / "data" / "seal-tools" / "seal-tools.catalog.json"
DESIGN_LINT_KEYS = {"num_leaves", "num_routers", "depth", "max_menu", "errors", "warnings"}
runner = CliRunner()

CATALOG = {"name": "shop", "description": "A shop", "children": [
    {"name": "orders", "description": "Orders.", "children": [
        {"name": "track", "description": "Track an order.",
         "parameters": {"type": "object", "properties": {"id": {"type": "string"}},
                        "required": ["id"]}},
        {"name": "cancel", "description": "Cancel an order."}]},
    {"name": "faq", "description": "Answers."}]}


def flat(text: str) -> str:
    """Output with rich's line wrapping undone."""
    return " ".join(text.split())


@pytest.fixture
def catalog_file(tmp_path: Path) -> Path:
    path = tmp_path / "shop.catalog.json"
    path.write_text(json.dumps(CATALOG), encoding="utf-8")
    return path


@pytest.fixture
def bad_catalog_file(tmp_path: Path) -> Path:
    doc = json.loads(json.dumps(CATALOG))
    doc["children"][0]["children"][1]["name"] = "cancel order"
    doc["children"][1]["name"] = "BACK"
    path = tmp_path / "bad.catalog.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_lint_prints_stats(catalog_file: Path) -> None:
    result = runner.invoke(app, ["lint", "--no-overlaps", str(catalog_file)])
    assert result.exit_code == 0, result.output
    out = flat(result.stdout)
    assert "3 leaves, 2 routers, depth 2, largest menu 2 (<root>)" in out
    assert "ok, 0 warning(s)" in out


def test_lint_bad_catalog_exits_1_naming_the_path(bad_catalog_file: Path) -> None:
    result = runner.invoke(app, ["lint", "--no-overlaps", str(bad_catalog_file)])
    assert result.exit_code == 1
    out = flat(result.stdout)
    assert ("error orders/cancel order: bad name 'cancel order': expected a letter then "
            "letters, digits, '_' or '-'") in out
    assert "error BACK: reserved name 'BACK'" in out
    assert "2 error(s)" in out


def test_lint_json(catalog_file: Path, bad_catalog_file: Path) -> None:
    result = runner.invoke(app, ["lint", "--no-overlaps", str(catalog_file), "--json"])
    assert result.exit_code == 0
    report = json.loads(result.stdout)
    assert set(report) >= DESIGN_LINT_KEYS
    assert (report["num_leaves"], report["num_routers"], report["depth"],
            report["max_menu"], report["errors"], report["warnings"]) == (3, 2, 2, 2, [], [])

    result = runner.invoke(app, ["lint", "--no-overlaps", str(bad_catalog_file), "--json"])
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert [e["path"] for e in report["errors"]] == ["orders/cancel order", "BACK"]


def test_lint_seal_tools_via_the_console_script(seal_tools_path: Path) -> None:
    exe = Path(sys.executable).parent / "stackroute"
    command = [str(exe)] if exe.exists() else [sys.executable, "-m", "stackroute.server.cli"]
    env = {**os.environ, "COLUMNS": "200"}
    done = subprocess.run([*command, "lint", "--no-overlaps", str(seal_tools_path)],
                          capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    assert "4076 leaves, 2423 routers, depth 3, largest menu 146 (<root>)" in flat(done.stdout)

    result = runner.invoke(app, ["lint", "--no-overlaps", str(seal_tools_path), "--json"])
    assert result.exit_code == 0
    report = json.loads(result.stdout)
    assert set(report) >= DESIGN_LINT_KEYS
    assert (report["num_leaves"], report["num_routers"], report["depth"],
            report["max_menu"], report["errors"]) == (4076, 2423, 3, 146, [])


@pytest.fixture
def seal_tools_path() -> Path:
    if not SEAL_TOOLS.is_file():
        pytest.skip(f"{SEAL_TOOLS} is missing")
    return SEAL_TOOLS


def recorded_trace(tmp_path: Path, task: str = "track order 7") -> tuple[Path, list[str]]:
    from stackroute.runtime.catalog import build_tree

    machine = StackMachine(build_tree(CATALOG), ScriptedRouter(
        ["faq", "orders", ("track", {"id": "7"}), "DONE", "DONE"]), limits=Limits())
    state = machine.run(machine.start(task, run_id="r"))
    path = tmp_path / "run.trace.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        write_jsonl(state.trace, f)
    return path, format_tree(state.trace)


def test_trace_prints_the_tree(tmp_path: Path) -> None:
    path, lines = recorded_trace(tmp_path)
    result = runner.invoke(app, ["trace", str(path)])
    assert result.exit_code == 0
    assert result.stdout.splitlines() == lines
    assert lines == [
        '! start <root> {"task": "track order 7"}',
        "? <root> -> faq",
        "  * faq({}) = {}",
        "? <root> -> orders",
        "  > enter orders",
        "  ? orders -> track",
        '    * orders/track({"id": "7"}) = {"id": "7"}',
        "  ? orders -> DONE",
        "  < done orders",
        "? <root> -> DONE",
        '! finish <root> {"status": "done", "num_calls": 2}',
    ]


@pytest.mark.parametrize("content", [None, "not json\n", '{"seq": 0, "kind": "nope"}\n',
                                     "[1]\n"])
def test_trace_of_a_bad_file_exits_2(tmp_path: Path, content: str | None) -> None:
    path = tmp_path / "t.jsonl"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    result = runner.invoke(app, ["trace", str(path)])
    assert result.exit_code == 2
    assert isinstance(result.exception, SystemExit)


def test_trace_keeps_long_lines_whole(tmp_path: Path) -> None:
    path, lines = recorded_trace(tmp_path, task="track order 7 " + "please " * 20)
    result = runner.invoke(app, ["trace", str(path)], env={"COLUMNS": "80"})
    assert result.stdout.splitlines() == lines


def test_lint_prints_names_with_brackets(tmp_path: Path) -> None:
    doc: dict[str, Any] = {"name": "r", "children": [{"name": "a[/]"}, {"name": "[bold]b"}]}
    path = tmp_path / "brackets.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    result = runner.invoke(app, ["lint", "--no-overlaps", str(path)])
    assert result.exit_code == 1
    assert isinstance(result.exception, SystemExit)  # not a MarkupError
    assert "a[/]: bad name" in flat(result.stdout)
    assert "[bold]b: bad name" in flat(result.stdout)
