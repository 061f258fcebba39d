"""Keep every page under app.py's `st.navigation`, even on a deep link.

Streamlit treats an app with a `pages/` folder as a legacy (v1) multipage app
until some run calls `st.navigation`: a shared link such as `/explorer`
opened first after a server start would run `pages/explorer.py` on its own,
with the legacy file-name menu and without app.py's sidebar. Every page calls
`ensure_navigation()` first; in that case it switches the process to
`st.navigation` routing (what `st.navigation` itself does) and reruns, so
app.py routes the same URL.

Streamlit 1.67 has no public switch for this (the flag is set only inside
`st.navigation`), and the project keeps its top-level `pages/` folder, so the
flag `PagesManager.uses_pages_directory` is read and set guardedly: where a
Streamlit release moves or drops it, nothing is changed and the page runs with
that release's own routing (at worst the legacy menu on a first deep link),
never an error.
"""

from __future__ import annotations

import threading

import streamlit as st

_RUN = threading.local()  # set by app.py in the script thread, read (and cleared) by the page


def _pages_manager() -> type | None:
    """Streamlit's PagesManager class when it still carries the legacy-routing flag, else None."""
    try:
        from streamlit.runtime.pages_manager import PagesManager
    except ImportError:
        return None
    return PagesManager if hasattr(PagesManager, "uses_pages_directory") else None


def mark_routed() -> None:
    """app.py, at the start of every run: this run goes through `st.navigation`."""
    _RUN.routed = True


def ensure_navigation() -> None:
    """First line of every page: when the page runs without app.py (legacy routing), rerun under it.

    Checked per run, not by the process-wide flag alone: when several first visitors
    arrive at once, runs that started in legacy mode before one of them switched the
    flag must rerun too (seen in the ten-session load test).
    """
    routed = getattr(_RUN, "routed", False)
    _RUN.routed = False
    if routed:
        return
    manager = _pages_manager()
    if manager is None:
        return  # a Streamlit without the flag: leave its routing alone
    manager.uses_pages_directory = False
    st.rerun()
