"""A small thread-safe map of recently used entries, for the engine's caches of work repeated
by clients that send the same statement again (parsed statements, pull query plans)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Generic, TypeVar

V = TypeVar("V")


class RecentlyUsed(Generic[V]):
    """A small thread-safe map that forgets its least recently used entries beyond ``size``."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._entries: OrderedDict[Any, V] = OrderedDict()

    def get(self, key: Any) -> V | None:
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                self._entries.move_to_end(key)
            return hit

    def put(self, key: Any, value: V) -> None:
        with self._lock:
            self._entries[key] = value
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
