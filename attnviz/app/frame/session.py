"""Which visitor's session a script runs for, and whether that visitor is still there.

Streamlit has no public "session ended" hook. It does expose the script run
context's `session_id` and `streamlit.runtime.get_instance().is_active_session`
(documented as safe from any thread), which say whether a session's tab is still
connected. Both are reached inside `try`: should a Streamlit release move them,
`session_id()` answers None and `session_alive()` answers True (unknown), so a
background run falls back to its wall-time limit instead of crashing the page. A task's handle
stops it once its session is gone (`attnviz.app.frame.door.start`: `Handle.stop_when_gone`).

A new session also lacks what Streamlit recorded of the page's widgets: every button with a callback
is drawn by `button` or `submit`, so that a click a new session gets first — a tab left open across a
server restart — still runs its callback (issue 46, point 13; `tests/test_house.py` finds a bare one).
A value widget's first change in a new session keeps its value and loses its callback too, but is not
replayed: the tab sends every widget's value and the session has none before to compare with, so the
change cannot be told from values changed before the restart (replaying every `on_change` would redo
a stale chart selection or reset a lesson's step). Losing them there: the sidebar's repair of a choice
the change made impossible, the lesson picker, the training task's preset, the mask grid's edit, the
teacher's typed address, and a chart click (`on_select`) — each acts from the next change on.
"""

from __future__ import annotations

import logging

import streamlit as st

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


# -- buttons whose callback survives a server restart (issue 46, point 13) ----------------------------

_CALLED = "frame.button_called"  # the keys of buttons whose callback Streamlit ran before this run
_DROPPED = "frame.dropped_click"  # a click whose callback Streamlit dropped: (key, callback, args)


def button(label: str, *, key: str, on_click, args: tuple = (), where=None, **options) -> bool:
    """`where.button(label, key=key, on_click=on_click, args=args, **options)` (`where`: a column or
    other container; `st` by default), whose callback also runs for the first click a session gets.

    Streamlit calls a widget's callback from what the session's previous run recorded of the widget
    (`SessionState._call_callbacks` reads the widget's metadata; Streamlit 1.67). A new session — a
    tab that reconnected to a restarted server — has no record, so its first click's callback was
    dropped while the button still returned True (issue 46, point 13: the first "Next →" after a
    restart was lost). Then the click is kept (`_DROPPED`) and the app reruns; the shell runs the
    callback at the start of that run, before any widget (`replay`), where Streamlit would have run
    it. (A page that reruns before drawing the button loses nothing: Streamlit 1.67 replays the
    click's trigger in a rerun the script asks for.) A button without a callback (`on_click=None`)
    loses nothing and is drawn as it is. Left: a URL-bound widget the replayed callback sets is drawn
    with its new value, but Streamlit 1.67 writes it to the link only from the session's next change
    (a session yet to compact a browser message has no earlier value to sync from)."""
    return _trigger((where or st).button, label, key, on_click, args, options)


def submit(label: str, *, key: str, on_click, args: tuple = (), **options) -> bool:
    """`st.form_submit_button(label, key=key, on_click=on_click, args=args, **options)` inside a form,
    whose callback also runs for the first click a session gets (see `button`). The form's other
    widgets' values reach the rerun: they are the session's widget values by then."""
    return _trigger(st.form_submit_button, label, key, on_click, args, options)


def _trigger(draw, label: str, key: str, on_click, args: tuple, options: dict) -> bool:
    """A click widget drawn by `draw` whose dropped callback is kept for `replay`, then a rerun."""
    if on_click is None:
        return draw(label, key=key, **options)
    clicked = draw(label, key=key, on_click=_called, args=(key, on_click, *args), **options)
    called = st.session_state.setdefault(_CALLED, set())
    if clicked and key not in called:
        st.session_state[_DROPPED] = (key, on_click, args)
        st.rerun()
    called.discard(key)
    return clicked


def _called(key: str, on_click, *args) -> None:
    st.session_state.setdefault(_CALLED, set()).add(key)
    on_click(*args)


def replay() -> None:
    """The shell's first call in every run, before any widget: the callback of a click that Streamlit
    dropped in the previous run (`button`). Run here, it may set any widget's value, as a callback may;
    run where the button is drawn, it could not set one already drawn above it. Counted as called, so
    a trigger Streamlit replays in this rerun does not run it again."""
    dropped = st.session_state.pop(_DROPPED, None)
    if dropped is not None:
        key, on_click, args = dropped
        _called(key, on_click, *args)
