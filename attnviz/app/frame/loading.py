"""Frameworks and shared modules, imported once per server process.

A framework import takes seconds (PyTorch ~1 s, TensorFlow ~5 s on a quiet
machine, far more under load), so it happens once per server, with a message
saying what is loading, and `loaded()` lets a page draw something useful before
it has (the explorer's float64 reference preview).
"""

from __future__ import annotations

import threading

import streamlit as st

from attnviz.cache import env_number
from attnviz.frameworks import FRAMEWORKS, backend, installed, label

# Intra-op threads per computation on the server (ATTNVIZ_THREADS, default 1; at least 1): a classroom
# server runs many visitors' computations at once, and on a busy 2-core machine two PyTorch threads made
# small runs 10-1000x slower (each parallel region waits for a descheduled thread). The Timing page
# sets its own count for a sweep and restores this one afterwards.
APP_THREADS = int(env_number("ATTNVIZ_THREADS", 1, minimum=1))

_IMPORTS = threading.Lock()
_LOADED: set[str] = set()


def import_shared_modules() -> None:
    """Import pandas once, under a lock, before any page uses it.

    Several first visitors at once import it from several script threads; one of
    them then saw a partially initialised pandas (AttributeError: 'pandas' has no
    attribute 'Series', in the ten-session load test). Costs ~0.25 s once per server.
    """
    with _IMPORTS:
        import pandas  # noqa: F401


def loaded(framework: str) -> bool:
    """Whether this server process has already loaded `framework` (no import happens here)."""
    return framework in _LOADED


@st.cache_resource(show_spinner=False)
def _load(framework: str):
    be = backend(framework)
    be.set_threads(APP_THREADS)
    _LOADED.add(framework)
    return be


def load_framework(framework: str):
    """The framework's attnviz backend, imported once per server process, with `APP_THREADS` threads.

    The first call shows "Loading PyTorch…" (or TensorFlow) while it imports.
    """
    if loaded(framework):
        return _load(framework)
    with st.spinner(f"Loading {label(framework)}… (once per server; this takes a few seconds)"):
        return _load(framework)


@st.cache_resource(show_spinner=False)
def gpu_available(framework: str) -> bool:
    return load_framework(framework).gpu_available()


def installed_frameworks() -> list[str]:
    """The frameworks importable here, in `FRAMEWORKS` order (nothing is imported)."""
    return installed()


__all__ = ["APP_THREADS", "FRAMEWORKS", "gpu_available", "import_shared_modules", "load_framework", "loaded"]
