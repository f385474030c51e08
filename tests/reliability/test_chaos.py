"""The chaos run at CI size (`stackroute bench chaos --smoke`): three instances over a
PostgreSQL of its own, one kill, one PostgreSQL restart with every lease lapsing, one slow
takeover whose claimant is frozen between its claim and its load while another instance
claims the same sessions, and a catalog deleted on one instance while another holds it in
memory. Side effects are counted in the handlers' own table. On the code before the fix of
issue 28 findings 2 and 4 this run fails (a session was created on the deleted catalog).
Its full size is in bench/results/2026-12-03-cpu-chaos."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from stackroute.bench.reliability.chaos import main, run_chaos
from stackroute.bench.reliability.chaos_report import SMOKE


def test_chaos_smoke_loses_no_session_and_runs_no_side_effect_twice(
        pg_server: object, tmp_path: Path) -> None:
    # pg_server: skip (or fail under CI) where PostgreSQL is missing; the run starts its own
    # cluster, since it restarts it.
    report = run_chaos(replace(SMOKE, out=tmp_path / "chaos"))
    assert report.is_ok, report.summary()
    crash = report.crash
    assert crash.kills == 2 and report.pg_restarts == 1 and report.slow_takeovers == 1
    assert report.claimants_frozen == 1, report.summary()
    assert report.sessions_claimed_twice_in_takeover >= 1, report.summary()
    assert report.catalog_deletes_refused_in_use == 1 and report.catalogs_deleted == 1
    assert report.creates_refused_on_deleted_catalog == 1
    assert crash.sessions_accepted >= SMOKE.sessions and report.lost == 0
    assert report.side_effects > 0 and report.duplicates == 0
    assert crash.leaf_executions == report.side_effects


def test_chaos_command_refuses_a_single_instance() -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--instances", "1"])
    assert exited.value.code == 2
