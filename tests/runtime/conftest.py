"""Runtime test fixtures: the shared data folder (next to the repo) and the seal-tools catalog."""

from __future__ import annotations

from pathlib import Path

import pytest
from stackroute.runtime.catalog import load_catalog
from stackroute.runtime.tree import CapabilityTree

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """`shared/data` beside the repository root (../shared/data); skip where it is absent."""
    for candidate in (REPO_ROOT.parent / "shared" / "data", REPO_ROOT / "shared" / "data"):
        if candidate.is_dir():
            return candidate
    pytest.skip("shared/data is not next to the repository root")


@pytest.fixture(scope="session")
def seal_tools_path(shared_data: Path) -> Path:
    path = shared_data / "seal-tools" / "seal-tools.catalog.json"
    if not path.is_file():
        pytest.skip(f"{path} is missing")
    return path


@pytest.fixture(scope="session")
def seal_tools(seal_tools_path: Path) -> CapabilityTree:
    """The seal-tools catalog, loaded once per session (about half a second)."""
    return load_catalog(seal_tools_path)
