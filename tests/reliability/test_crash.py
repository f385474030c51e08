"""Crash safety, CI size: `stackroute serve` SIGKILLed 5 times under live multi-level sessions
(bench/reliability/crash_harness.py has the checks and the full size), and the engine import
path the harness relies on."""

from __future__ import annotations

from pathlib import Path

import pytest
from stackroute.bench.fixtures.scripted_engine import ScriptedEngine
from stackroute.bench.reliability.crash_harness import SMOKE_KILLS, HarnessOptions, run_harness
from stackroute.server.http.app import build_engine
from stackroute.server.settings import ServerSettings, SettingsError


def test_kills_lose_nothing_and_run_no_leaf_twice(tmp_path: Path) -> None:
    report = run_harness(HarnessOptions(kills=SMOKE_KILLS, seed=7, out=tmp_path / "crash"))
    assert report.is_ok, report.summary()
    assert report.kills == SMOKE_KILLS
    assert report.kills_with_progress >= SMOKE_KILLS - 1, report.summary()
    assert report.sessions_accepted >= 5 and report.sessions_through_kills >= 1
    assert report.leaf_executions > 0 and report.gates_accepted > 0
    assert report.catalogs_accepted == SMOKE_KILLS + 1  # one per server start


def test_an_engine_named_by_import_path_is_built_without_a_registry() -> None:
    settings = ServerSettings(engine="stackroute.bench.fixtures.scripted_engine:create")
    assert isinstance(build_engine(settings), ScriptedEngine)


@pytest.mark.parametrize(("engine", "expected"), [
    ("stackroute.bench.no_such_module:create", "cannot import module"),
    ("stackroute.bench.fixtures.scripted_engine:nothing", "has no callable 'nothing'"),
    ("stackroute.bench.fixtures.scripted_engine:DEFAULT_DELAY_S", "has no callable"),
    ("not an engine", "unknown engine 'not an engine'"),
])
def test_bad_engine_import_paths_are_settings_errors(engine: str, expected: str) -> None:
    with pytest.raises(SettingsError, match=expected):
        ServerSettings.load(engine=engine)
