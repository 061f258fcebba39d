"""Loaded checkpoints kept in memory, least recently used evicted beyond
`ATTNVIZ_CHECKPOINT_CACHE_MB` of weights, keyed by the canonical source and the files' stamp."""

from __future__ import annotations

import math
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from attnviz.pretrained.files import FILES

ENV_CACHE_MB = "ATTNVIZ_CHECKPOINT_CACHE_MB"  # weights kept in memory by `load`, all checkpoints together
CACHE_MB = 2048


def env_number(name: str, default: float) -> float:
    """The operator's setting `name` as a finite number ≥ 0, or `default`."""
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        return default
    return value if math.isfinite(value) and value >= 0 else default


class CheckpointCache:
    """Checkpoints by key; one load per key at a time, other keys load in parallel."""

    def __init__(self):
        self._items: OrderedDict[str, tuple[Any, Any]] = OrderedDict()
        self._lock = threading.Lock()
        self._loading: dict[str, threading.Lock] = {}

    def get(self, key: str, stamp: Any, build: Callable[[], Any]) -> Any:
        with self._lock:
            key_lock = self._loading.setdefault(key, threading.Lock())
        with key_lock:
            with self._lock:
                hit = self._items.get(key)
                if hit and hit[0] == stamp:
                    self._items.move_to_end(key)
                    return hit[1]
            checkpoint = build()
            with self._lock:
                self._items[key] = (stamp, checkpoint)
                self._evict()
            return checkpoint

    def _evict(self) -> None:
        budget = env_number(ENV_CACHE_MB, CACHE_MB) * 2**20
        while len(self._items) > 1 and sum(getattr(c, "nbytes", 0) for _, c in self._items.values()) > budget:
            self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._items)


CACHE = CheckpointCache()


def stamp(path: Path) -> tuple:
    """Changes when a checkpoint's files change (so an edited checkpoint is read again)."""
    found = []
    for name in FILES:
        try:
            st = (path / name).stat()
            found.append((name, st.st_size, st.st_mtime_ns))
        except OSError:
            found.append((name, None, None))
    return tuple(found)
