"""Which visitor's session a script runs for, and whether that visitor is still there.

Streamlit has no public "session ended" hook. It does expose the script run
context's `session_id` and `streamlit.runtime.get_instance().is_active_session`
(documented as safe from any thread), which say whether a session's tab is still
connected. Both are reached inside `try`: should a Streamlit release move them,
`session_id()` answers None and `session_alive()` answers True (unknown), so a
background run falls back to its wall-time limit instead of crashing the page. A task's handle
stops it once its session is gone (`attnviz.app.frame.door.start`: `Handle.stop_when_gone`).
"""

from __future__ import annotations

import logging

_LOG = logging.getLogger(__name__)


def session_id() -> str | None:
    """The current script run's session id; None outside a Streamlit session (or if Streamlit moved it)."""
    try:
        from streamlit.runtime.scriptrunner import get_script_run_ctx

        ctx = get_script_run_ctx(suppress_warning=True)
        return getattr(ctx, "session_id", None) if ctx is not None else None
    except Exception:  # a Streamlit release without this API: no session id
        return None


def session_alive(session_id: str | None) -> bool:
    """False once the session's tab is gone (closed, expired) or the server is stopping.

    True while it is connected, and True when Streamlit cannot say: no server runtime
    (AppTest, bare mode), no session id, or an API this release lacks.
    """
    if not session_id:
        return True
    try:
        from streamlit import runtime
        from streamlit.runtime import RuntimeState

        if not runtime.exists():
            return True
        instance = runtime.get_instance()
        if instance.state in (RuntimeState.STOPPING, RuntimeState.STOPPED):
            return False
        return bool(instance.is_active_session(session_id))
    except Exception:  # the runtime's API changed: unknown, so alive (the time limit still ends the run)
        return True
