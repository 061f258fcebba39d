"""One memory budget for every result the server keeps, and the server-wide limits on work.

A classroom shares one `streamlit run app.py` process, so what one visitor
computes must not be able to fill the machine. Everything cached (explorer
runs, comparisons, steady-state timings, pretrained encoder outputs) lives in
one `ByteCache`, bounded by the bytes of its entries, not by their count:

- `ATTNVIZ_CACHE_MB` (default 512): total bytes of cached results; the least
  recently used entries are evicted first, expired ones (TTL) before them.
- `ATTNVIZ_CACHE_TTL_S` (default 1800): how long an entry lives without use; a
  timer drops expired entries and hands their memory back to the OS even when no
  request arrives (`attnviz.cache.ByteCache`).
- `ATTNVIZ_MAX_CONCURRENT_RUNS` (default 2): computations running at once;
  further visitors wait for a slot (each run is itself capped by the app's
  per-run budget, `config.APP_MEMORY_BUDGET`). A training holds a slot for its
  whole run (`hold_slot`), and trainings never hold the last one.
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
import functools
import threading
from collections.abc import Callable, Iterator

from attnviz.cache import MIB, ByteCache, env_number, nbytes, release_memory, trim_heap

__all__ = [
    "MIB",
    "ByteCache",
    "bounded",
    "hold_slot",
    "nbytes",
    "release_memory",
    "run_slot",
    "sweep_slot",
    "trim_heap",
]

# Each setting's rule, stated: a bound of 0 would turn the app off, so each must be positive.
CACHE_BYTES = int(env_number("ATTNVIZ_CACHE_MB", 512, minimum=1) * MIB)
DEFAULT_TTL_S = env_number("ATTNVIZ_CACHE_TTL_S", 1800, minimum=1)
MAX_CONCURRENT_RUNS = int(env_number("ATTNVIZ_MAX_CONCURRENT_RUNS", 2, minimum=1))
SWEEP_BYTES = int(env_number("ATTNVIZ_SWEEP_MB", 1024, minimum=1) * MIB)


CACHE = ByteCache(CACHE_BYTES, ttl=DEFAULT_TTL_S)
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
        trim_heap()  # finished or stopped (a closed tab): its intermediates are freed, hand their pages back


# Trainings run in the background for minutes: each holds one run slot for its whole run, and together
# they never hold the last one, so a visitor's page run still finds a slot (issue 26 §4).
MAX_TRAINING_SLOTS = max(1, MAX_CONCURRENT_RUNS - 1)
_TRAINING_HELD = [0]
_TRAINING_LOCK = threading.Lock()


def hold_slot() -> Callable[[], None] | None:
    """One run slot for background work that outlives the script run (a training), without waiting.

    Returns:
        The function that gives the slot back (call it once, when the work ends), or None when
        `MAX_TRAINING_SLOTS` are held by such work or no slot is free.
    """
    with _TRAINING_LOCK:
        if _TRAINING_HELD[0] >= MAX_TRAINING_SLOTS or not _RUN_SLOTS.acquire(blocking=False):
            return None
        _TRAINING_HELD[0] += 1
    given = threading.Event()

    def give_back() -> None:
        with _TRAINING_LOCK:
            if not given.is_set():
                given.set()
                _TRAINING_HELD[0] -= 1
                _RUN_SLOTS.release()

    return give_back


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
