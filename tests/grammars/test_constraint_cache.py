"""ConstraintCache: keyed by (key, fingerprint), compiled once, thread-safe."""

from __future__ import annotations

import threading
import time

import pytest
from stackroute.grammars.cache import ConstraintCache, tokenizer_fingerprint
from stackroute.grammars.menu import CompiledMenu, compile_menu
from tokenizers import Tokenizer


def test_hit_miss_and_counters() -> None:
    cache: ConstraintCache[str] = ConstraintCache()
    assert cache.get_or_compile("a", "fp1", lambda: "A1") == "A1"
    assert cache.get_or_compile("a", "fp1", lambda: "other") == "A1"
    assert cache.get_or_compile("a", "fp2", lambda: "A2") == "A2"  # other tokenizer
    assert cache.get("a", "fp1") == "A1"
    assert cache.get("b", "fp1") is None
    assert ("a", "fp2") in cache
    assert len(cache) == 2
    stats = cache.stats()
    assert (stats.num_entries, stats.num_compiled, stats.num_hits) == (2, 2, 1)
    assert stats.compile_ms_total >= 0.0
    assert cache.num_compiled == 2


def test_failed_compile_stores_nothing() -> None:
    cache: ConstraintCache[str] = ConstraintCache()

    def broken() -> str:
        raise ValueError("bad schema")

    with pytest.raises(ValueError, match="bad schema"):
        cache.get_or_compile("a", "fp", broken)
    assert cache.get("a", "fp") is None
    assert cache.get_or_compile("a", "fp", lambda: "fixed") == "fixed"
    assert cache.stats().num_compiled == 1


def test_concurrent_requests_compile_once() -> None:
    cache: ConstraintCache[object] = ConstraintCache()
    calls = []

    def slow_compile() -> object:
        calls.append(1)
        time.sleep(0.05)
        return object()

    results: list[object] = []

    def request() -> None:
        results.append(cache.get_or_compile("k", "fp", slow_compile))

    threads = [threading.Thread(target=request) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1
    assert len(results) == 8
    assert all(result is results[0] for result in results)
    assert cache.stats().num_hits == 7


def test_menus_keyed_by_node_and_fingerprint(tiny_tokenizer: Tokenizer, tiny_end_id: int) -> None:
    cache: ConstraintCache[CompiledMenu] = ConstraintCache()
    fingerprint = tokenizer_fingerprint(tiny_tokenizer)
    first = cache.get_or_compile(
        "payments",
        fingerprint,
        lambda: compile_menu(["pay", "DONE"], tiny_tokenizer, end_token_id=tiny_end_id),
    )
    again = cache.get_or_compile("payments", fingerprint, lambda: pytest.fail("recompiled"))
    assert again is first


def test_fingerprint_depends_on_content_not_identity(tiny_tokenizer: Tokenizer) -> None:
    copy = Tokenizer.from_str(tiny_tokenizer.to_str())
    assert tokenizer_fingerprint(copy) == tokenizer_fingerprint(tiny_tokenizer)
    changed = Tokenizer.from_str(tiny_tokenizer.to_str())
    changed.add_special_tokens(["<|extra|>"])
    assert tokenizer_fingerprint(changed) != tokenizer_fingerprint(tiny_tokenizer)
