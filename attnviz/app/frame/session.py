"""Which visitor's session a script runs for, and whether that visitor is still there.

Streamlit has no public "session ended" hook. It does expose the script run
context's `session_id` and `streamlit.runtime.get_instance().is_active_session`
(documented as safe from any thread), which say whether a session's tab is still
connected. Both are reached inside `try`: should a Streamlit release move them,
`session_id()` answers None and `session_alive()` answers True (unknown), so a
background run falls back to its wall-time limit instead of crashing the page. A task's handle
stops it once its session is gone (`attnviz.app.frame.door.start`: `Handle.stop_when_gone`).

A new session also lacks what Streamlit recorded of the page's widgets (issue 46, point 13): Streamlit
1.67 runs a widget's callback only from the metadata the session's previous run recorded, so a tab left
open across a server restart — a new session, whose first run gets every widget's value from the tab —
has its first change's callback dropped (the value itself is kept). Read in the requests the tab sends
(Chromium, the server restarted under an open tab): the tab sends every widget's value with each
change, and a URL-bound widget (`bind="query-params"`) writes its new value into the link before the
request leaves, so neither the values nor the link say which one changed; a chart resends its last
selection with every rerun. What this module keeps, and what is still lost:
- clicks: every button with a callback is drawn by `button` or `submit`; a click a new session gets
  first still runs its callback (`replay`, before any widget). Kept.
- value widgets are drawn by `value`. Kept where the page holds the value apart from the widget
  (`value`'s `unchanged`): the lesson picker (the link the server writes still names the lesson shown),
  the teacher's typed address and the mask grid's edits (their callbacks are functions of the widget's
  value: one run again from an earlier change does the same thing).
- the sidebar's repair (`url.changed`) needs no callback there: a new session's first run repairs the
  configuration its link holds (`attnviz.app.sidebar.url.first_visit`), and the repaired values win over
  the tab's. Kept, with the repair's note among the link's notes; lost: the padding mask's shortening of
  the real key length, which only a known change to the mask asks for.
- lost: the training task's preset (the link names the new task, and the values the preset sets may
  have been edited since the last choice), the Generate toggle's (a new session has no stopped
  generation to forget), and a chart click (`chart`: a selection in a first run may be one made before
  the restart). Each acts from the next change on.
A URL-bound widget that a kept callback sets (the mask grid's `custom_mask`, a click's choice) is drawn
and used with its new value, but Streamlit 1.67 writes it to the link only from the session's next
change. `tests/test_house.py` finds a callback drawn around these helpers.
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

_CALLED = "frame.button_called"  # the keys of widgets whose callback Streamlit ran before this run
_DROPPED = "frame.dropped_click"  # a callback Streamlit dropped: (key, callback, args)
_DRAWN = "frame.values_drawn"  # the keys of value widgets `value` drew in this session
_UNKNOWN = object()  # `value`'s `unchanged` not given


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
        _keep(key, on_click, args)
    called.discard(key)
    return clicked


def _keep(key: str, callback, args: tuple) -> None:
    """A callback Streamlit dropped, kept for `replay` at the start of the run this asks for."""
    st.session_state[_DROPPED] = (key, callback, args)
    st.rerun()


def _called(key: str, on_click, *args) -> None:
    st.session_state.setdefault(_CALLED, set()).add(key)
    on_click(*args)


# -- value widgets and charts (issue 46, point 13: the module says what is kept) -------------------


def value(
    draw,
    *widget_args,
    key: str,
    on_change,
    args: tuple = (),
    unchanged=_UNKNOWN,
    follow: bool = False,
    **options,
):
    """`draw(*widget_args, key=key, on_change=on_change, args=args, **options)` (`draw`: `st.selectbox`,
    `c1.toggle`, `st.data_editor`…), whose callback also runs for a new session's first change where
    that change can be told.

    Args:
        unchanged: the widget's value (`st.session_state[key]`) when the visitor has changed nothing
            that the session does not hold already: the lesson the link names, an empty field, a grid
            without edits. Given, the widget's first draw in a session — a tab left open across a
            server restart sends its values with its first change, and Streamlit calls no callback
            then — runs the callback when the value differs from it: kept, then the app reruns and
            `replay` runs it before any widget, as for a click (`button`). Not given: Streamlit's own
            behaviour (the callback is lost on that first change; the module says where and why).
        follow: the widget shows `unchanged` in every run (set before it is drawn: the page's state
            moves it, e.g. a link or Back); in its first draw `unchanged` is the widget's `default`
            instead, as the tab's value must be read first (widgets with a `default`: a segmented
            control, pills, a multiselect).
    """
    drawn = st.session_state.setdefault(_DRAWN, set())
    first = key not in drawn
    if follow and first:
        options["default"] = unchanged
    elif follow:
        st.session_state[key] = unchanged
    returned = draw(*widget_args, key=key, on_change=_called, args=(key, on_change, *args), **options)
    drawn.add(key)
    called = st.session_state.setdefault(_CALLED, set())
    if first and unchanged is not _UNKNOWN and key not in called and st.session_state[key] != unchanged:
        _keep(key, on_change, args)
    called.discard(key)
    return returned


def chart(figure, *, key: str, on_select, where=None, **options):
    """`where.plotly_chart(figure, key=key, on_select=on_select, **options)` (`where`: a column or other
    container; `st` by default): a chart whose click has a callback. A new session's first click loses it, as Streamlit 1.67 does:
    the tab resends a chart's last selection with every rerun (seen in Chromium's requests), so a
    selection in a new session's first run may be a click from before a server restart, and running
    its callback again would undo what the visitor did since (a thumbnail's ablation toggled back)."""
    return (where or st).plotly_chart(figure, key=key, on_select=on_select, **options)


def replay() -> None:
    """The shell's first call in every run, before any widget: the callback that Streamlit dropped in
    the previous run (`button`, `value`). Run here, it may set any widget's value, as a callback may;
    run where the button is drawn, it could not set one already drawn above it. Counted as called, so
    a trigger Streamlit replays in this rerun does not run it again."""
    dropped = st.session_state.pop(_DROPPED, None)
    if dropped is not None:
        key, on_click, args = dropped
        _called(key, on_click, *args)
