"""bench/experiments/threads.py: the parts that need no model (configurations, the busy processes);
the measurement itself is a benchmark (bench/results/*-cpu-threads-*)."""

from __future__ import annotations

import pytest
from stackroute.bench.experiments import threads as threads_bench
from stackroute.bench.experiments.threads import busy_processes, parse_configs, wait_env


def test_configurations_name_threads_waits_and_precision() -> None:
    assert parse_configs("2:spin10000:bfloat16,1:default:float32") == [
        (2, "spin10000", "bfloat16"), (1, "default", "float32")]
    assert wait_env("passive") == {"OMP_WAIT_POLICY": "PASSIVE"} and wait_env("default") == {}
    with pytest.raises(ValueError, match=r"waits must be one of active, passive, default or "
                                         r"spinN; got 'sometimes'"):
        parse_configs("2:sometimes:float32")


def test_busy_processes_run_for_the_duration_and_are_killed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    started = []
    real_popen = threads_bench.subprocess.Popen

    def popen(*args: object, **kwargs: object) -> object:
        process = real_popen(*args, **kwargs)  # type: ignore[call-overload]
        started.append(process)
        return process

    monkeypatch.setattr(threads_bench.subprocess, "Popen", popen)
    with busy_processes(2):
        assert len(started) == 2 and all(p.poll() is None for p in started)
    assert all(p.poll() is not None for p in started)
