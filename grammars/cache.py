"""Compiled constraints keyed by (key, tokenizer fingerprint): compile once, reuse always.

A constraint compiled for one tokenizer is meaningless for another, so every entry is keyed by
the tokenizer's fingerprint as well as by what was compiled (a node path, a schema's JSON).

>>> cache: ConstraintCache[str] = ConstraintCache()
>>> cache.get_or_compile("payments", "fp", lambda: "compiled")
'compiled'
>>> cache.get_or_compile("payments", "fp", lambda: "again")
'compiled'
>>> cache.stats().num_compiled, cache.stats().num_hits
(1, 1)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import time
import weakref
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from stackroute.grammars.tokenizer import backend_of

T = TypeVar("T")

_fingerprints: weakref.WeakKeyDictionary[object, str] = weakref.WeakKeyDictionary()
_fingerprints_lock = threading.Lock()


def tokenizer_fingerprint(tokenizer: object) -> str:
    """A stable hex digest of what decides tokenisation: vocab, merges, pre-tokenizer,
    normaliser and added/special tokens.

    Computed once per tokenizer object (about 35 ms for a 49k byte-level BPE: it hashes the
    serialised tokenizer) and then cached; tokenizers are treated as immutable once loaded.
    """
    with _fingerprints_lock:
        try:
            cached = _fingerprints.get(tokenizer)
        except TypeError:  # not weak-referenceable or unhashable: compute every time
            cached = None
    if cached is not None:
        return cached
    fingerprint = _compute_fingerprint(tokenizer)
    # A tokenizer that is not weak-referenceable is simply not cached.
    with _fingerprints_lock, contextlib.suppress(TypeError):
        _fingerprints[tokenizer] = fingerprint
    return fingerprint


def _compute_fingerprint(tokenizer: object) -> str:
    backend = backend_of(tokenizer)
    if backend is not None:
        # The Rust serialisation lists the vocab by id and merges in rank order: stable.
        payload = backend.to_str()
    else:
        get_vocab = getattr(tokenizer, "get_vocab", None)
        if not callable(get_vocab):
            raise TypeError(f"cannot fingerprint tokenizer of type {type(tokenizer)!r}")
        vocab = sorted(get_vocab().items(), key=lambda item: (item[1], item[0]))
        special = sorted(getattr(tokenizer, "all_special_tokens", []))
        payload = json.dumps({"vocab": vocab, "special": special}, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class CacheStats:
    num_entries: int
    num_compiled: int
    num_hits: int
    compile_ms_total: float


class ConstraintCache(Generic[T]):
    """Thread-safe map `(key, fingerprint) -> compiled constraint`.

    Concurrent requests for the same missing entry compile it once: the others wait on that
    entry's lock, while other entries compile in parallel. A compile that raises stores
    nothing.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple[Hashable, str], T] = {}
        self._compiling: dict[tuple[Hashable, str], threading.Lock] = {}
        self._num_compiled = 0
        self._num_hits = 0
        self._compile_ms_total = 0.0

    def get_or_compile(self, key: Hashable, fingerprint: str, fn: Callable[[], T]) -> T:
        """The entry for `(key, fingerprint)`, calling `fn()` to compile it on a miss."""
        entry_key = (key, fingerprint)
        with self._lock:
            if entry_key in self._entries:
                self._num_hits += 1
                return self._entries[entry_key]
            entry_lock = self._compiling.setdefault(entry_key, threading.Lock())
        with entry_lock:
            with self._lock:
                if entry_key in self._entries:  # compiled by whoever held entry_lock
                    self._num_hits += 1
                    return self._entries[entry_key]
            started = time.perf_counter()
            try:
                value = fn()
            except BaseException:
                with self._lock:
                    self._compiling.pop(entry_key, None)
                raise
            elapsed_ms = (time.perf_counter() - started) * 1e3
            with self._lock:
                self._entries[entry_key] = value
                self._compiling.pop(entry_key, None)
                self._num_compiled += 1
                self._compile_ms_total += elapsed_ms
            return value

    def get(self, key: Hashable, fingerprint: str) -> T | None:
        """The entry if it is compiled, else None; never compiles."""
        with self._lock:
            return self._entries.get((key, fingerprint))

    def __contains__(self, entry_key: object) -> bool:
        with self._lock:
            return entry_key in self._entries

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    @property
    def num_compiled(self) -> int:
        return self._num_compiled

    @property
    def compile_ms_total(self) -> float:
        return self._compile_ms_total

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(
                num_entries=len(self._entries),
                num_compiled=self._num_compiled,
                num_hits=self._num_hits,
                compile_ms_total=self._compile_ms_total,
            )

    def clear(self) -> None:
        """Drop every entry (counters are kept: they describe the process's work)."""
        with self._lock:
            self._entries.clear()
