"""A bounded map that forgets the least recently used entry, safe to share between threads
(a catalog's router serves every session of the server at once).

>>> cache: Lru[str, int] = Lru(max_entries=2)
>>> cache.put("a", 1); cache.put("b", 2); cache.get("a"); cache.put("c", 3)
1
>>> cache.get("b") is None, cache.get("a"), len(cache)
(True, 1, 2)
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Lru(Generic[K, V]):
    def __init__(self, *, max_entries: int) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def pop(self, key: K) -> V | None:
        with self._lock:
            return self._entries.pop(key, None)

    def __len__(self) -> int:
        return len(self._entries)
