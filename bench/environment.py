"""Where a benchmark ran: hardware, library versions, the git commit, the machine's load.

Numbers from a shared machine mean little without its load, so the 1-minute load average at
the start is recorded too.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
LIBRARIES = ("stackroute", "torch", "transformers", "tokenizers", "xgrammar", "numpy", "vllm")


def environment() -> dict[str, Any]:
    """{"hardware": …, "versions": …, "git": …} for a summary."""
    return {"hardware": hardware(), "versions": versions(), "git": git_state()}


def engine_environment(engine: Any, *, git: dict[str, Any]) -> dict[str, Any]:
    """Where an engine benchmark ran: the engine, hardware, versions, and `git` — the state
    read when the run started (a long run outlives commits made meanwhile)."""
    return {"model": engine.info.model, "engine": engine.info.engine,
            "dtype": engine.info.dtype, "commit": git.get("commit"), "git": git,
            "hardware": hardware(), "versions": versions()}


def hardware() -> dict[str, Any]:
    info: dict[str, Any] = {
        "cpu_model": _cpu_model(),
        "cpu_cores": os.cpu_count(),
        "ram_gib": _ram_gib(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "load_average_1m": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
    }
    torch = sys.modules.get("torch")  # only if an engine already imported it
    if torch is not None and torch.cuda.is_available():
        info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    if torch is not None:
        info["torch_threads"] = torch.get_num_threads()
    return info


def versions() -> dict[str, str]:
    found = {}
    for name in LIBRARIES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def git_state() -> dict[str, Any]:
    """HEAD's commit and how many paths differ from it (results of a dirty tree say so)."""
    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", "-C", str(REPO_ROOT), *args], capture_output=True,
                                 text=True, timeout=10, check=True)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip()

    status = git("status", "--porcelain")
    return {"commit": git("rev-parse", "HEAD"),
            "num_changed_paths": None if status is None else len(status.splitlines())}


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _ram_gib() -> float | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None
