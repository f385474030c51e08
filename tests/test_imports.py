"""`import stackroute.runtime` (every module) and the runtime's CLI commands load no heavy
dependency. Each check runs in a fresh interpreter, so other tests' imports don't interfere."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("torch", "transformers", "xgrammar")

RUNTIME_IMPORTS = f"""
import importlib, pkgutil, sys
import stackroute.runtime as runtime
names = sorted(m.name for m in pkgutil.iter_modules(runtime.__path__))
for name in names:
    importlib.import_module("stackroute.runtime." + name)
assert len(names) >= 15, names
heavy = [m for m in {HEAVY!r} if m in sys.modules]
print(" ".join(names))
sys.exit(f"imported {{heavy}}" if heavy else 0)
"""

CLI_LINT_TRACE = f"""
import json, sys, tempfile, pathlib
from typer.testing import CliRunner
from stackroute.server.cli import app
d = pathlib.Path(tempfile.mkdtemp())
(d / "c.json").write_text(json.dumps({{"name": "r", "children": [{{"name": "a"}}]}}))
(d / "t.jsonl").write_text('{{"seq": 0, "kind": "start", "path": ""}}\\n')
runner = CliRunner()
assert runner.invoke(app, ["lint", "--no-overlaps", str(d / "c.json")]).exit_code == 0
assert runner.invoke(app, ["trace", str(d / "t.jsonl")]).exit_code == 0
heavy = [m for m in {HEAVY!r} if m in sys.modules]
sys.exit(f"imported {{heavy}}" if heavy else 0)
"""


def run_fresh(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)


def test_runtime_imports_no_heavy_dependency() -> None:
    done = run_fresh(RUNTIME_IMPORTS)
    assert done.returncode == 0, done.stderr
    assert "machine" in done.stdout.split() and "schemas" in done.stdout.split()


def test_lint_and_trace_commands_import_no_heavy_dependency() -> None:
    done = run_fresh(CLI_LINT_TRACE)
    assert done.returncode == 0, done.stderr
