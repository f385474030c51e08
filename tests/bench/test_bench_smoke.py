"""Every `stackroute bench` experiment's `--smoke`, through the command line as a user runs it.

`SMOKES` names, for each registered command, the smoke run this file makes (a subprocess of
`python -m stackroute.bench.cli NAME --smoke …`, which leaves a manifest.json in its --out
folder), or the test file that already runs that command's smoke size in-process. The guard
test fails when a command is registered with neither, so a new experiment cannot land
without a CI smoke run.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from stackroute.bench.cli import bench_app
from stackroute.bench.commands import BY_NAME
from stackroute.bench.manifest import MANIFEST, Manifest

REPO_ROOT = Path(__file__).resolve().parents[2]
SEAL_DIR = REPO_ROOT.parent / "shared" / "data" / "seal-tools"
NOT_EXPERIMENTS = {"generate", "run"}  # the suite harness: tests/bench/test_harness.py


@dataclass(frozen=True)
class Smoke:
    """How CI runs one command's smoke size."""

    args: tuple[str, ...] = ()  # after `NAME --smoke`; OUT is replaced by a temp folder
    needs: frozenset[str] = field(default_factory=frozenset)  # model, seal, pg, outlines
    covered_by: str | None = None  # a test file that runs this smoke in-process instead
    has_manifest: bool = True


def smoke(*args: str, needs: str = "model", has_manifest: bool = True) -> Smoke:
    return Smoke(args=args, needs=frozenset(needs.split()), has_manifest=has_manifest)


def covered(path: str) -> Smoke:
    return Smoke(covered_by=path)


SMOKES: dict[str, Smoke] = {
    "policy": smoke("--out", "OUT"),
    "robust": smoke("--out", "OUT"),
    "build-tree": smoke("--out", "OUT", needs="model seal"),
    "calibrate": smoke(needs="model seal", has_manifest=False),
    "speculation": covered("tests/bench/test_speculation_bench.py"),
    "guided-speculation": smoke("--out", "OUT"),
    "speculation-engine": smoke("--out", "OUT"),
    "unwind": smoke("--out", "OUT"),
    "request-latency": smoke("--out", "OUT"),
    "engine": smoke("--out", "OUT", needs="model outlines"),
    "jump-forward": smoke("--out", "OUT", needs="model seal"),
    "precision": smoke("--out", "OUT"),
    "precision-args": smoke("--out", "OUT", needs="model seal"),
    "threads": smoke("--out", "OUT"),
    "peers": smoke("--out", "OUT", needs="model seal"),
    "streaming": smoke("--out", "OUT"),
    "mcp": covered("tests/server/mcp/test_mcp_bench.py"),
    "shared-prompt": covered("tests/bench/test_shared_prompt_bench.py"),
    "out-of-scope": covered("tests/bench/test_out_of_scope_bench.py"),
    "abstention-cost": smoke("--out", "OUT"),
    "right-call": covered("tests/bench/test_right_call_bench.py"),
    "missing-values": smoke("--out", "OUT", needs="model seal"),
    "crash": covered("tests/reliability/test_crash.py"),
    "chaos": covered("tests/reliability/test_chaos.py"),
    "multi-instance": smoke("--db", "PG", "--out", "OUT", needs="pg"),
    "store-throughput": smoke("--db", "PG", needs="pg", has_manifest=False),
    "load": smoke(has_manifest=False),
    "fuzz": smoke(needs="", has_manifest=False),
    "index": smoke("--out", "OUT/INDEX.md", needs="", has_manifest=False),
}


def registered() -> set[str]:
    return {c.name for c in bench_app.registered_commands if c.name} - NOT_EXPERIMENTS


def test_every_registered_command_has_a_smoke_run() -> None:
    assert registered() == set(SMOKES), (
        f"commands without a smoke run: {sorted(registered() - set(SMOKES))}; "
        f"smoke runs of no command: {sorted(set(SMOKES) - registered())}")
    assert registered() == set(BY_NAME)


@pytest.mark.parametrize("name", sorted(n for n, s in SMOKES.items() if s.covered_by))
def test_covering_files_run_the_smoke_size(name: str) -> None:
    path = REPO_ROOT / str(SMOKES[name].covered_by)
    assert path.is_file(), f"{name}: {path} is gone"
    text = path.read_text(encoding="utf-8")
    module = BY_NAME[name].module
    package, _, leaf = module.rpartition(".")
    through_cli = f'"stackroute.bench.cli", "{name}"' in text
    assert module in text or f"from {package} import {leaf}" in text or through_cli, (
        f"{path} does not run {module}")
    assert "--smoke" in text or "SMOKE" in text, f"{path} runs no smoke size"


def _marks(s: Smoke) -> list[pytest.MarkDecorator]:
    return [pytest.mark.model] if "model" in s.needs else []


RUN_HERE = [pytest.param(name, marks=_marks(s), id=name)
            for name, s in sorted(SMOKES.items()) if s.covered_by is None]


@pytest.mark.parametrize("name", RUN_HERE)
def test_smoke_runs_through_the_command_line(name: str, tmp_path: Path,
                                             request: pytest.FixtureRequest) -> None:
    s = SMOKES[name]
    if "seal" in s.needs and not SEAL_DIR.is_dir():
        pytest.skip(f"Seal-Tools data not found at {SEAL_DIR}")
    if "outlines" in s.needs and importlib.util.find_spec("outlines") is None:
        pytest.skip("outlines not installed (the bench extra)")
    out = tmp_path / "out"
    replace = {"OUT": str(out)}
    if "pg" in s.needs:
        replace["PG"] = request.getfixturevalue("pg_url")
    args = [replace.get(a, a.replace("OUT", str(out))) for a in s.args]
    if any(a.endswith("INDEX.md") for a in args):
        out.mkdir()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "stackroute.bench.cli", name, "--smoke", *args],
                          capture_output=True, text=True, timeout=900, env=env, cwd=REPO_ROOT)
    assert done.returncode == 0, f"{name} --smoke failed:\n{done.stdout[-3000:]}\n" \
                                 f"{done.stderr[-3000:]}"
    if s.has_manifest:
        manifest = Manifest.from_json((out / MANIFEST).read_text(encoding="utf-8"))
        assert manifest.question == BY_NAME[name].question
        assert manifest.command.startswith(f"stackroute bench {name} --smoke")
        assert manifest.commit and manifest.finished >= manifest.started
    if name == "index":
        assert "| folder | date | question |" in (out / "INDEX.md").read_text()


def test_an_engine_the_experiment_cannot_measure_is_refused_clearly() -> None:
    done = subprocess.run([sys.executable, "-m", "stackroute.bench.cli", "speculation",
                           "--smoke", "--engine", "vllm"], capture_output=True, text=True,
                          timeout=120, cwd=REPO_ROOT)
    assert done.returncode == 2
    assert "needs the transformers engine" in done.stdout + done.stderr
    assert "Traceback" not in done.stderr


def test_manifest_round_trips_and_rejects_other_shapes(tmp_path: Path) -> None:
    from stackroute.bench.manifest import (
        ManifestError,
        build_manifest,
        read_manifest,
        write_manifest,
    )

    m = build_manifest(question="q?", command="stackroute bench x", engine="transformers",
                       model=None, started="2026-12-04T00:00:00+00:00", summary={"a": 1.5},
                       git={"commit": "abc", "num_changed_paths": 2})
    write_manifest(tmp_path, m)
    assert read_manifest(tmp_path) == m and m.is_dirty is True
    (tmp_path / MANIFEST).write_text(json.dumps({"question": "q"}))
    with pytest.raises(ManifestError, match="missing"):
        read_manifest(tmp_path)
