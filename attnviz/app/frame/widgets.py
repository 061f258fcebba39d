"""Small page widgets and chart callbacks shared by the pages."""

from __future__ import annotations

import streamlit as st


def table_height(rows: int) -> int:
    """Pixels for a dataframe that shows `rows` rows without scrolling."""
    return 38 + 35 * rows


def batch_item(spec) -> int:
    """A selector for which batch item to show (0 when there is one)."""
    if spec.batch == 1:
        return 0
    return st.radio("Batch item", list(range(spec.batch)), horizontal=True, key="view.batch_item")


def enlarge_clicked(chart_key: str, target_key: str, n_heads: int) -> None:
    """Chart callback: a click on a head panel sets `target_key` to "head h" (head h's click
    targets are trace `n_heads + h`). Lives here, not in a page, so the callback holds no page
    variables (a page's function would keep its whole module namespace alive)."""
    points = st.session_state[chart_key].selection.points
    if points and points[0]["curve_number"] >= n_heads:
        st.session_state[target_key] = f"head {points[0]['curve_number'] - n_heads}"


_CALLED = "frame.button_called"  # the keys of buttons whose callback Streamlit ran in this run


def button(label: str, *, key: str, on_click, args: tuple = (), **options) -> bool:
    """`st.button(label, key=key, on_click=on_click, args=args, **options)`, whose callback also runs on
    the first click a session gets. Streamlit calls a widget's callback from what the session's
    previous run recorded of it; a new session — a tab that reconnected to a restarted server — has no
    record, so that click's callback was dropped while the button still returned True (issue 46,
    point 13: the first "Next →" after a restart was lost). Then the callback runs here, and a rerun
    draws what it changed."""
    clicked = st.button(label, key=key, on_click=_called, args=(key, on_click, *args), **options)
    called = st.session_state.setdefault(_CALLED, set())
    if clicked and key not in called:
        on_click(*args)
        st.rerun()
    called.discard(key)
    return clicked


def _called(key: str, on_click, *args) -> None:
    st.session_state.setdefault(_CALLED, set()).add(key)
    on_click(*args)
