"""One memory budget for every result the server keeps, and the server-wide limits on work.

A classroom shares one `streamlit run app.py` process, so what one visitor
computes must not be able to fill the machine. Everything cached (explorer
runs, comparisons, steady-state timings, pretrained encoder outputs) lives in
one `ByteCache`, bounded by the bytes of its entries, not by their count:

- `ATTNVIZ_CACHE_MB` (default 512): total bytes of cached results; the least
  recently used entries are evicted first, expired ones (TTL) before them.
- `ATTNVIZ_CACHE_TTL_S` (default 1800): how long an entry lives without use.
- `ATTNVIZ_MAX_CONCURRENT_RUNS` (default 2): computations running at once;
  further visitors wait for a slot (each run is itself capped by the app's
  per-run budget, `config.APP_MEMORY_BUDGET`).
- `ATTNVIZ_SWEEP_MB` (default 1024): the estimated peak of one Timing sweep;
  one sweep runs at a time per server, others are refused with a message.

So the server's memory stays below: its baseline + the cache budget + the
concurrent runs × the per-run budget (+ one sweep). docs/security.md says how
to set these for a class.

Usage (the decorated function's arguments are its cache key; they must be
hashable, e.g. strings):

    @cache.bounded("pretrained output", ttl=600, spinner="Running the encoder…")
    def encode(source: str, text: str) -> EncoderOutput: ...

Each call returns its own deep copy, so no session can change another's result.
"""

from __future__ import annotations

import contextlib
import copy
import ctypes
import dataclasses
import functools
import gc
import os
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Any

import numpy as np

MIB = 2**20


def _env_number(name: str, default: float) -> float:
    """A positive number from the environment; the default when unset or unreadable."""
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        return default
    return value if value > 0 and value == value else default  # NaN fails value == value


CACHE_BYTES = int(_env_number("ATTNVIZ_CACHE_MB", 512) * MIB)
DEFAULT_TTL_S = _env_number("ATTNVIZ_CACHE_TTL_S", 1800)
MAX_CONCURRENT_RUNS = int(_env_number("ATTNVIZ_MAX_CONCURRENT_RUNS", 2))
SWEEP_BYTES = int(_env_number("ATTNVIZ_SWEEP_MB", 1024) * MIB)


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


@dataclasses.dataclass
class _Entry:
    value: Any
    size: int
    expires: float


class ByteCache:
    """A thread-safe least-recently-used cache bounded by the bytes of its values."""

    def __init__(self, budget: int):
        self.budget = budget
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()
        self.bytes = 0

    def get(self, key: Hashable) -> tuple[bool, Any]:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry.expires < time.monotonic():
                if entry is not None:
                    self._drop(key)
                return False, None
            self._entries.move_to_end(key)
            return True, entry.value

    def put(self, key: Hashable, value: Any, ttl: float) -> bool:
        """Keep `value` unless it alone is over the budget; evict to make room."""
        size = nbytes(value)
        if size > self.budget:
            return False
        with self._lock:
            if key in self._entries:
                self._drop(key)
            self._evict(self.budget - size)
            self._entries[key] = _Entry(value, size, time.monotonic() + ttl)
            self.bytes += size
            return True

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.bytes = 0

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"entries": len(self._entries), "bytes": self.bytes, "budget": self.budget}

    def _drop(self, key: Hashable) -> None:
        self.bytes -= self._entries.pop(key).size

    def _evict(self, room: int) -> None:
        now = time.monotonic()
        for key in [k for k, e in self._entries.items() if e.expires < now]:
            self._drop(key)
        while self._entries and self.bytes > room:
            self._drop(next(iter(self._entries)))  # least recently used first


CACHE = ByteCache(CACHE_BYTES)
_RUN_SLOTS = threading.BoundedSemaphore(MAX_CONCURRENT_RUNS)
_HOLDING = threading.local()  # a thread that holds a slot does not take a second (nested calls)


@contextlib.contextmanager
def run_slot(spinner: str | None = None) -> Iterator[None]:
    """One of the server's `MAX_CONCURRENT_RUNS` computation slots (waiting, with a message, if all are taken)."""
    if getattr(_HOLDING, "held", False):
        yield
        return
    if not _RUN_SLOTS.acquire(blocking=False):
        import streamlit as st

        with st.spinner("Waiting for other visitors' runs to finish…"):
            _RUN_SLOTS.acquire()
    _HOLDING.held = True
    try:
        if spinner:
            import streamlit as st

            with st.spinner(spinner):
                yield
        else:
            yield
    finally:
        _HOLDING.held = False
        _RUN_SLOTS.release()


def bounded(name: str, ttl: float = DEFAULT_TTL_S, spinner: str | None = None) -> Callable:
    """Decorator: cache a function's results in the server's one byte-bounded cache.

    Args:
        name: names the cache family in the key (two functions never share entries).
        ttl: seconds an entry lives without use.
        spinner: text shown while computing (None: nothing shown).
    """

    def decorate(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def cached(*args, **kwargs):
            key = (name, args, tuple(sorted(kwargs.items())))
            hit, value = CACHE.get(key)
            if not hit:
                with run_slot(spinner):
                    value = fn(*args, **kwargs)
                CACHE.put(key, value, ttl)
                trim_heap()  # the run's intermediates are freed: hand their pages back
            return copy.deepcopy(value)

        cached.cache_name = name
        return cached

    return decorate


# -- Timing sweeps: one at a time per server --------------------------------------------

_SWEEP = threading.Lock()


@contextlib.contextmanager
def sweep_slot() -> Iterator[bool]:
    """The server's one sweep slot: yields True when this caller holds it, False when another does.

    Memory is handed back to the operating system when the sweep ends (or stops).
    """
    held = _SWEEP.acquire(blocking=False)
    try:
        yield held
    finally:
        if held:
            _SWEEP.release()
            release_memory()


def trim_heap() -> None:
    """Return freed heap pages to the OS (glibc's malloc_trim, every arena; a no-op elsewhere).

    Each visitor's script thread allocates from its own malloc arena; without this,
    pages freed after a large run stay with the process (the live-server memory test
    grew ~100 MB per large configuration).
    """
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def release_memory() -> None:
    """Collect garbage and return freed heap pages to the OS."""
    gc.collect()
    trim_heap()
