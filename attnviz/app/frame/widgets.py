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
