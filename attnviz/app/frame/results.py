"""One memory budget for every result the server keeps.

A classroom shares one `streamlit run app.py` process, so what one visitor
computes must not be able to fill the machine. Everything cached (explorer
runs, comparisons, steady-state timings, the results of heavy tasks that ran in a
worker: `attnviz.app.frame.door.run(..., cache=…)`) lives in one `ByteCache`,
bounded by the bytes of its entries, not by their count:

- `ATTNVIZ_CACHE_MB` (default 512): total bytes of cached results; the least
  recently used entries are evicted first, expired ones (TTL) before them.
- `ATTNVIZ_CACHE_TTL_S` (default 1800): how long an entry lives without use; a
  timer drops expired entries and hands their memory back to the OS even when no
  request arrives (`attnviz.cache.ByteCache`).
- `ATTNVIZ_SWEEP_MB` (default 1024): the estimated peak of one Timing sweep, checked
  before it starts, and the memory budget its worker enforces.

No framework runs here: every computation runs in the execution layer's worker processes
(`attnviz.exec`, bounded by `ATTNVIZ_MAX_CONCURRENT_RUNS` workers, `ATTNVIZ_RUN_MB` per task and
`ATTNVIZ_RUN_MAX_SECONDS`; `attnviz.app.frame.door` is the app's side), and what comes back is kept
here: `door.run(..., cache="explorer run")` for the explorer's runs (`attnviz.app.sidebar.runs`),
whose configurations are refused before they are sent when their estimate is over the per-run
budget (`settings.check_fits`). docs/security.md says how to set these for a class.

Usage for light work that stays in the server (a table read from a checkpoint's files; the
decorated function's arguments are its cache key; they must be hashable, e.g. strings):

    @results.bounded("checkpoint kinds", ttl=600)
    def kinds(source: str) -> dict: ...

Each call returns its own deep copy, so no session can change another's result.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from attnviz.cache import MIB, ByteCache, env_number, nbytes, release_memory, trim_heap

__all__ = ["MIB", "ByteCache", "bounded", "nbytes", "read_only", "release_memory", "trim_heap"]

# Each setting's rule, stated: a bound of 0 would turn the app off, so each must be positive.
CACHE_BYTES = int(env_number("ATTNVIZ_CACHE_MB", 512, minimum=1) * MIB)
DEFAULT_TTL_S = env_number("ATTNVIZ_CACHE_TTL_S", 1800, minimum=1)
SWEEP_BYTES = int(env_number("ATTNVIZ_SWEEP_MB", 1024, minimum=1) * MIB)


CACHE = ByteCache(CACHE_BYTES, ttl=DEFAULT_TTL_S)


def bounded(name: str, ttl: float = DEFAULT_TTL_S, spinner: str | None = None) -> Callable:
    """Decorator: cache a function's results in the server's one byte-bounded cache.

    Args:
        name: names the cache family in the key (two functions never share entries).
        ttl: seconds an entry lives without use.
        spinner: text shown while it computes (None: nothing shown).
    """

    def decorate(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def cached(*args, **kwargs):
            key = (name, args, tuple(sorted(kwargs.items())))
            hit, value = CACHE.get(key)
            if not hit:
                with _spinner(spinner):
                    value = fn(*args, **kwargs)
                CACHE.put(key, value, ttl)
                trim_heap()  # the run's intermediates are freed: hand their pages back
            return copy.deepcopy(value)

        cached.cache_name = name
        return cached

    return decorate


def _spinner(text: str | None):
    if not text:
        return contextlib.nullcontext()
    import streamlit as st

    return st.spinner(text)


def read_only(value: Any) -> Any:
    """A deep copy of `value` whose every NumPy array is read-only (`writeable` False), through
    dataclasses, lists, tuples and dicts: a value the cache can hand to every session as it is (no copy
    per rerun), since a change to one of its arrays raises instead of reaching another session."""
    kept = copy.deepcopy(value)
    _freeze(kept, set())
    return kept


def _freeze(value: Any, seen: set[int]) -> None:
    if id(value) in seen:
        return
    seen.add(id(value))
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            _freeze(getattr(value, field.name), seen)
    elif isinstance(value, list | tuple):
        for item in value:
            _freeze(item, seen)
    elif isinstance(value, dict):
        for item in value.values():
            _freeze(item, seen)
