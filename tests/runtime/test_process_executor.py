"""Handlers in worker processes: a hung, crashing or greedy handler costs one worker."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest
from stackroute.runtime.catalog import build_tree
from stackroute.runtime.handlers import HandlerTable
from stackroute.runtime.process_executor import ProcessExecutor
from stackroute.runtime.tree import CapabilityTree

TOOLS = ["hang", "hard_exit", "worker_pid", "whoami", "boom", "add", "allocate",
         "made_by_factory"]


@pytest.fixture(scope="module")
def tree() -> CapabilityTree:
    return build_tree({"name": "root", "children": [
        {"name": name, "description": name, "handler": f"handler_fixtures:{name}"}
        for name in TOOLS] + [{"name": "plain", "description": "no handler"}]})


@pytest.fixture
def executor() -> Iterator[ProcessExecutor]:
    ex = ProcessExecutor(HandlerTable(allowed_modules=["handler_fixtures"]), timeout_s=2.0,
                         max_workers=1, memory_limit_bytes=1 << 30)
    yield ex
    ex.close()


def test_results_errors_and_the_call_id_cross_the_process(
        tree: CapabilityTree, executor: ProcessExecutor) -> None:
    assert executor.execute(tree.node("add"), {"a": 2, "b": 3}, "r:0").result == 5
    who = executor.execute(tree.node("whoami"), {"x": 1}, "r:1").result
    assert who == {"call_id": "r:1", "leaf": "whoami", "arguments": {"x": 1}}
    failed = executor.execute(tree.node("boom"), {}, "r:2")
    assert failed.error == "ValueError: bad input for boom"
    assert executor.execute(tree.node("plain"), {"k": "v"}, "r:3").result == {"k": "v"}
    # A catalog handler is imported by its path in the worker, so a handler a factory made
    # (a closure: no picklable name) runs too.
    assert executor.execute(tree.node("made_by_factory"), {"n": 1}, "r:6").result == \
        {"label": "factory", "n": 1}
    pid = executor.execute(tree.node("worker_pid"), {}, "r:4").result
    assert pid != os.getpid()
    assert executor.execute(tree.node("worker_pid"), {}, "r:5").result == pid  # reused


def test_a_hung_handler_is_killed_and_the_next_call_gets_a_new_worker(
        tree: CapabilityTree, executor: ProcessExecutor) -> None:
    first = executor.execute(tree.node("worker_pid"), {}, "r:0").result
    started = time.monotonic()
    outcome = executor.execute(tree.node("hang"), {}, "r:1")
    assert outcome.error == "handler timed out after 2 s; its worker process was stopped"
    assert time.monotonic() - started < 10
    assert executor.num_killed == 1
    with pytest.raises(ProcessLookupError):
        os.kill(first, 0)  # the hung worker is gone, not parked on a thread
    second = executor.execute(tree.node("worker_pid"), {}, "r:2").result
    assert isinstance(second, int) and second != first


def test_a_handler_that_kills_its_process_is_an_error_not_a_crash(
        tree: CapabilityTree, executor: ProcessExecutor) -> None:
    outcome = executor.execute(tree.node("hard_exit"), {}, "r:0")
    assert outcome.error == "handler's worker process died (exit code 7)"
    assert executor.execute(tree.node("add"), {"a": 1, "b": 1}, "r:1").result == 2


def test_memory_beyond_the_limit_fails_the_call_only(
        tree: CapabilityTree, executor: ProcessExecutor) -> None:
    outcome = executor.execute(tree.node("allocate"), {"megabytes": 4096}, "r:0")
    assert outcome.error == "MemoryError: "
    assert executor.execute(tree.node("allocate"), {"megabytes": 8}, "r:1").result == 8 << 20


def test_a_handler_that_is_not_importable_is_refused_clearly(tree: CapabilityTree) -> None:
    table = HandlerTable({"add": lambda a, b: a + b})
    ex = ProcessExecutor(table, timeout_s=2.0)
    try:
        outcome = ex.execute(tree.node("add"), {"a": 1, "b": 2}, "r:0")
        assert outcome.error is not None
        assert outcome.error.startswith("handler of add cannot run in a worker process")
        assert "module-level function" in outcome.error
    finally:
        ex.close()
