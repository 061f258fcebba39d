"""Chart-selection callbacks of the Pretrained page.

They live in the library, not in the page: a function defined in a page keeps
that page's whole namespace (its results, its figures) alive for as long as
the widget holds the callback — the session and 120 s after its tab closes.
"""

from __future__ import annotations

import streamlit as st

from attnviz.plots.tokens import QUERY_SIDE


def token_clicked(chart_key: str, target_key: str) -> None:
    """A token in the head view: isolate its lines (left side: what it attends to; right: what attends to it)."""
    points = st.session_state[chart_key].selection.points
    if not points:
        st.session_state[target_key] = None
        return
    side, index = points[-1]["customdata"][:2]
    st.session_state[target_key] = (int(index), "out" if side == QUERY_SIDE else "in")


def thumbnail_clicked(chart_key: str, enlarged_key: str, ablate_key: str, click_ablates_key: str) -> None:
    """A model-view thumbnail: enlarge that layer × head, or toggle it in the ablation list."""
    points = st.session_state[chart_key].selection.points
    if not points:
        return
    pick = tuple(int(v) for v in points[-1]["customdata"][:2])
    if st.session_state.get(click_ablates_key):
        chosen = list(st.session_state.get(ablate_key) or [])
        st.session_state[ablate_key] = [p for p in chosen if p != pick] if pick in chosen else [*chosen, pick]
    else:
        st.session_state[enlarged_key] = pick


def set_flag(key: str) -> None:
    """Button callback: remember a click across the extra run a page switch makes."""
    st.session_state[key] = True
