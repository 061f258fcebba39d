"""One bounded cache and one way to read an operator's number from the environment.

Every cache in attnviz (the app's results, loaded checkpoints, built layers) is a
`ByteCache`: least recently used first, bounded by the bytes of its values (or by
any other `size`, e.g. 1 per entry for a count), entries that expire after a
time-to-live without use. Expired entries are dropped on time, by a timer, not
only when the next request arrives, and the freed memory is handed back to the
operating system (`release_memory`).

Operator settings (`ATTNVIZ_*`) are read with `env_number`, whose `minimum`
states each setting's rule explicitly (e.g. a cache of 0 MiB is refused, a
download limit of 0 MiB is allowed and means "none").

This module imports no framework and no Streamlit.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import gc
import math
import os
import sys
import threading
import time
import warnings
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

MIB = 2**20


def env_number(name: str, default: float, *, minimum: float) -> float:
    """A finite number ≥ `minimum` from the environment variable `name`.

    Unset → `default`. Unreadable, NaN/inf or below `minimum` → `default`, with a
    `RuntimeWarning` naming the variable, the value and the rule (an operator's typo
    must not silently turn a bound off, nor stop the server).
    """
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if math.isfinite(value) and value >= minimum:
        return value
    warnings.warn(
        f"{name}={raw!r} ignored: a finite number ≥ {minimum:g} is required; using {default:g}.",
        RuntimeWarning,
        stacklevel=2,
    )
    return default


def nbytes(obj: Any, _seen: set[int] | None = None) -> int:
    """Bytes an object holds, counted through arrays, dataclasses, dicts, lists and tuples."""
    seen = set() if _seen is None else _seen
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        return obj.nbytes if obj.base is None or obj.flags.owndata else obj.nbytes + nbytes(obj.base, seen)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        fields = [getattr(obj, f.name) for f in dataclasses.fields(obj)]
        return sys.getsizeof(obj) + sum(nbytes(v, seen) for v in fields)
    if isinstance(obj, dict):
        return sys.getsizeof(obj) + sum(nbytes(k, seen) + nbytes(v, seen) for k, v in obj.items())
    if isinstance(obj, (list, tuple, set, frozenset)):
        return sys.getsizeof(obj) + sum(nbytes(v, seen) for v in obj)
    if hasattr(obj, "__dict__"):
        return sys.getsizeof(obj) + nbytes(vars(obj), seen)
    return sys.getsizeof(obj)


def trim_heap() -> None:
    """Return freed heap pages to the OS (glibc's `malloc_trim`, every arena; a no-op elsewhere).

    Each server thread allocates from its own malloc arena; without this, pages
    freed after a large run stay with the process.
    """
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def release_memory() -> None:
    """Collect garbage and return freed heap pages to the OS."""
    gc.collect()
    trim_heap()


@dataclasses.dataclass
class _Entry:
    value: Any
    size: int
    ttl: float | None
    expires: float


class ByteCache:
    """A thread-safe least-recently-used cache bounded by the summed `size` of its values.

    Args:
        budget: the bound (bytes for the default `size`); a callable is read at each
            eviction (an operator setting that tests change at run time).
        ttl: seconds an entry lives without use (None: until evicted); `put` may override.
        size: an entry's weight (default: `nbytes`; `lambda v: 1` bounds the count).
        keep_one: never evict the last entry, even when it alone is over the budget
            (a loaded model is kept so the next call does not load it again).
        reap_every: seconds between timed expiry sweeps (default: a quarter of the
            shortest TTL put, between 1 s and 60 s). Expired entries are dropped by a
            daemon timer and their memory released, without waiting for a request.
        clock: seconds now (default `time.monotonic`); a test passes its own to step time.
    """

    def __init__(
        self,
        budget: int | Callable[[], int],
        *,
        ttl: float | None = None,
        size: Callable[[Any], int] = nbytes,
        keep_one: bool = False,
        reap_every: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._clock = clock
        self._budget = budget
        self.ttl = ttl
        self._size = size
        self._keep_one = keep_one
        self._reap_every = reap_every
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()
        self._building: dict[Hashable, threading.Lock] = {}
        self._reaper: threading.Thread | None = None
        self.bytes = 0

    @property
    def budget(self) -> int:
        return int(self._budget() if callable(self._budget) else self._budget)

    def get(self, key: Hashable) -> tuple[bool, Any]:
        """`(True, value)` for a live entry (now most recently used), else `(False, None)`."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return False, None
            now = self._clock()
            if entry.expires < now:
                self._drop(key)
                return False, None
            if entry.ttl is not None:
                entry.expires = now + entry.ttl  # "without use": a hit renews the lease
            self._entries.move_to_end(key)
            return True, entry.value

    def put(self, key: Hashable, value: Any, ttl: float | None = None) -> bool:
        """Keep `value` unless it alone is over the budget (and `keep_one` is off); evict to make room."""
        size = self._size(value)
        budget = self.budget
        if size > budget and not self._keep_one:
            return False
        ttl = self.ttl if ttl is None else ttl
        with self._lock:
            if key in self._entries:
                self._drop(key)
            self._evict(budget - size)
            expires = math.inf if ttl is None else self._clock() + ttl
            self._entries[key] = _Entry(value, size, ttl, expires)
            self.bytes += size
        if ttl is not None:
            self._start_reaper(ttl)
        return True

    def get_or_build(self, key: Hashable, build: Callable[[], Any], ttl: float | None = None) -> Any:
        """The cached value for `key`, or `build()`'s, kept; one build per key at a time."""
        hit, value = self.get(key)
        if hit:
            return value
        with self._lock:
            key_lock = self._building.setdefault(key, threading.Lock())
        try:
            with key_lock:  # a second caller for the same key waits, then hits
                hit, value = self.get(key)
                if not hit:
                    value = build()
                    self.put(key, value, ttl)
        finally:
            with self._lock:
                self._building.pop(key, None)
        return value

    def expire(self) -> int:
        """Drop every expired entry now; returns how many were dropped."""
        with self._lock:
            now = self._clock()
            stale = [k for k, e in self._entries.items() if e.expires < now]
            for key in stale:
                self._drop(key)
        return len(stale)

    def pop(self, key: Hashable) -> None:
        with self._lock:
            if key in self._entries:
                self._drop(key)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.bytes = 0

    def keys(self) -> list[Hashable]:
        with self._lock:
            return list(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Hashable) -> bool:
        return self.get(key)[0]

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"entries": len(self._entries), "bytes": self.bytes, "budget": self.budget}

    def _drop(self, key: Hashable) -> None:
        self.bytes -= self._entries.pop(key).size

    def _evict(self, room: int) -> None:
        now = self._clock()
        for key in [k for k, e in self._entries.items() if e.expires < now]:
            self._drop(key)
        while self._entries and self.bytes > room:
            self._drop(next(iter(self._entries)))  # least recently used first

    def _start_reaper(self, ttl: float) -> None:
        every = self._reap_every or min(60.0, max(1.0, ttl / 4))
        with self._lock:
            if self._reaper is not None and self._reaper.is_alive():
                return
            # The thread holds only a weak reference: a cache nobody uses any more is collected.
            self._reaper = threading.Thread(
                target=_reap, args=(weakref.ref(self), every), name="attnviz-cache-expiry", daemon=True
            )
            self._reaper.start()


def _reap(ref: weakref.ref, every: float) -> None:
    """Drop a cache's expired entries every `every` seconds; hand their memory back to the OS."""
    while True:
        time.sleep(every)
        cache = ref()
        if cache is None:
            return
        if cache.expire():
            del cache
            release_memory()
