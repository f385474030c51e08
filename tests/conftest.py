"""Session fixtures shared by every test tier: the embedded model and one engine over it.

The real default model is converted into a session temp folder (about 30 s, once), unless
`STACKROUTE_CACHE_DIR` is set, in which case that persistent cache is used (a developer's
shortcut: conversions there survive between runs). Models load here, never at import.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from model_mark import loads_the_real_model, unmarked_model_use
from pg_fixture import pg_server, pg_url  # noqa: F401  (PostgreSQL: a cluster per session)
from stackroute.server.engines.model_store import (
    CACHE_DIR_ENV,
    LoadedModel,
    load_model,
    resolve_model,
)

REPO_ROOT = Path(__file__).resolve().parent.parent

pytest_plugins = ["pytester"]  # tests/test_model_mark.py runs pytest on a test file of its own


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test that uses the real model without `@pytest.mark.model` fails before it loads it.
    Each test keeps the model's request-free answers (routing/judgement_store.py) in a folder
    of its own: a scripted engine's answers are the test's, not the next test's (a hook, not a
    fixture, so no test's fixture plan changes)."""
    from stackroute.server.routing import judgement_store

    folder = Path(tempfile.mkdtemp(prefix="judgements-"))
    _judgement_dirs.append((judgement_store.judgement_dir, folder))
    judgement_store.judgement_dir = lambda: folder
    problem = unmarked_model_use(item)
    if problem is not None:
        pytest.fail(problem, pytrace=False)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    from stackroute.server.routing import judgement_store

    if _judgement_dirs:
        previous, folder = _judgement_dirs.pop()
        judgement_store.judgement_dir = previous
        shutil.rmtree(folder, ignore_errors=True)


# the judgement folders of the tests running now, innermost last (pytester nests a run)
_judgement_dirs: list[tuple[Any, Path]] = []


@pytest.fixture(scope="session")
@loads_the_real_model
def embedded_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default GGUF converted into a model folder, once per session."""
    configured = os.environ.get(CACHE_DIR_ENV)
    cache_dir = Path(configured) if configured else tmp_path_factory.mktemp("model-cache")
    return resolve_model(None, cache_dir=cache_dir)


@pytest.fixture(scope="session")
@loads_the_real_model
def embedded_model(embedded_model_dir: Path) -> LoadedModel:
    """The embedded default model in float32, loaded once per session; treat it as read-only."""
    return load_model(embedded_model_dir, dtype="float32")


@pytest.fixture(scope="session")
@loads_the_real_model
def engine(embedded_model: LoadedModel) -> Any:
    """One TransformersEngine over the session's model (its prefix cache is shared state:
    tests that count cached tokens build their own engine over the same LoadedModel)."""
    from stackroute.server.engines.transformers_engine import TransformersEngine

    return TransformersEngine(loaded=embedded_model)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data beside the repository (present on developer machines and in CI)."""
    path = REPO_ROOT.parent / "shared" / "data"
    if not path.is_dir():
        pytest.skip(f"shared data not found at {path}")
    return path
