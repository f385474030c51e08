"""Several `stackroute serve` instances over one real PostgreSQL (a throwaway cluster:
tests/pg_fixture.py): a session started on A is approved through B and finishes on C while C
streams its events; and the crash harness at CI size with three instances, one SIGKILLed and
restarted at each kill (bench/reliability/crash_harness.py has the checks; its full size is in
bench/results/2026-12-03-cpu-multi-instance)."""

from __future__ import annotations

from pathlib import Path

from stackroute.bench.reliability.crash_harness import PACED_ENGINE, HarnessOptions, run_harness
from stackroute.bench.reliability.multi_instance import relay


def test_a_session_started_on_a_is_approved_through_b_and_finishes_on_c(
        pg_url: str, tmp_path: Path) -> None:
    report = relay(pg_url, tmp_path, num_sessions=2)
    assert report.is_ok, report.failures
    assert report.sessions == 2 and report.duplicates == 0
    assert report.leaf_executions == 6  # check_limit, send_transfer, freeze_card, each once
    # C wakes on NOTIFY, not on its 1 s poll (which alone would give a p50 near 500 ms):
    # 17 ms here at a load average of 10, 186 ms with 10 sessions at 24.
    assert report.event_latency_ms_p50 < 400, report


def test_instances_killed_in_turn_lose_nothing_and_run_no_leaf_twice(
        pg_url: str, tmp_path: Path) -> None:
    report = run_harness(HarnessOptions(
        instances=3, db_url=pg_url, kills=3, max_sessions=8, concurrency=6, seed=11,
        min_delay_s=1.0, max_delay_s=2.0, lease_s=1.5, out=tmp_path / "crash",
        engine=PACED_ENGINE))  # paced sessions are still running when the kills land
    assert report.is_ok, report.summary()
    assert report.kills == 3 and report.instances == 3
    assert report.sessions_accepted >= 6, report.summary()
    assert report.sessions_through_kills >= 1, report.summary()
    assert report.leaf_executions > 0 and report.gates_accepted > 0
