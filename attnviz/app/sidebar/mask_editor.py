"""The custom mask editor: presets and a checkbox grid, stored in the `custom_mask` field (and the link)."""

from __future__ import annotations

import numpy as np
import streamlit as st

from attnviz import masks
from attnviz.app.frame import session
from attnviz.app.frame.literal import escape_markdown
from attnviz.app.frame.loading import import_shared_modules
from attnviz.app.sidebar.url import state
from attnviz.errors import SpecError
from attnviz.settings import LIMITS

MAX_EDITOR_SIDE = 64  # the cell-by-cell mask editor up to 64 × 64
PRESETS = ("causal", "sliding window", "strided", "block diagonal", "padding", "all allowed", "all blocked")


def preset_mask(name: str, len_q: int, len_kv: int, width: int) -> np.ndarray:
    return {
        "causal": lambda: masks.causal(len_q, len_kv),
        "sliding window": lambda: masks.sliding_window(len_q, len_kv, width),
        "strided": lambda: masks.strided(len_q, len_kv, width),
        "block diagonal": lambda: masks.block_diagonal(len_q, len_kv, width),
        "padding": lambda: masks.padding(min(width, len_kv), len_q, len_kv)[0],
        "all allowed": lambda: np.ones((len_q, len_kv), bool),
        "all blocked": lambda: np.zeros((len_q, len_kv), bool),
    }[name]()


def _store_mask(mask: np.ndarray) -> None:
    """Callbacks only (before the run, so the sidebar's widget may change): the mask into its field."""
    try:
        st.session_state["custom_mask"] = masks.encode_mask(mask)
    except SpecError as error:
        st.session_state["mask.problem"] = str(error)
    st.session_state["mask.version"] = st.session_state.get("mask.version", 0) + 1  # a fresh grid


def _apply_preset(len_q: int, len_kv: int) -> None:
    width = int(st.session_state["mask.width"])
    _store_mask(preset_mask(st.session_state["mask.preset"], len_q, len_kv, width))


def _grid_edited(key: str, len_q: int, len_kv: int, columns: list[str]) -> None:
    mask = masks.decode_mask(state()["custom_mask"], len_q, len_kv)
    for row, cells in st.session_state[key].get("edited_rows", {}).items():
        for column, value in cells.items():
            mask[int(row), columns.index(column)] = bool(value)
    _store_mask(mask)


def editor_columns(k_labels: list[str]) -> list[str]:
    """Grid column headers that name the key: "key 3" for positions, "3 · cat" for words."""
    return [f"key {k}" if k == str(j) else f"{j} · {k}" for j, k in enumerate(k_labels)]


def mask_editor(cfg: dict, q_labels: list[str], k_labels: list[str]) -> None:
    """Presets plus a checkbox grid; each change is stored in the `custom_mask` field (and the link)."""
    len_q, len_kv = len(q_labels), len(k_labels)
    current = masks.decode_mask(cfg["custom_mask"], len_q, len_kv)
    with st.expander("Custom mask editor — ticked = may attend", expanded=True, icon=":material/edit:"):
        problem = st.session_state.pop("mask.problem", None)
        if problem:
            st.error(escape_markdown(problem))
        c1, c2, c3 = st.columns([2, 1, 1], vertical_alignment="bottom")
        c1.selectbox("Preset", PRESETS, key="mask.preset")
        c2.number_input(
            "w (window / stride / block / length)", 1, int(LIMITS["len_kv"][1]), 3, key="mask.width"
        )
        session.button(
            "Apply preset", key="mask.apply", on_click=_apply_preset, args=(len_q, len_kv), where=c3
        )
        if len_q > MAX_EDITOR_SIDE or len_kv > MAX_EDITOR_SIDE:
            st.info(
                f"The cell-by-cell grid is shown up to {MAX_EDITOR_SIDE} × {MAX_EDITOR_SIDE}; "
                "at this size use a preset."
            )
        else:
            import_shared_modules()  # here, not at import: keeps it off the first chart's path
            import pandas as pd

            columns = editor_columns(k_labels)
            frame = pd.DataFrame(
                current,
                index=[q if q == str(i) else f"{i} · {q}" for i, q in enumerate(q_labels)],
                columns=columns,
            )
            key = f"mask.grid.{st.session_state.get('mask.version', 0)}.{len_q}x{len_kv}"
            session.value(  # edits from before a server restart, applied again, give the same mask
                st.data_editor, frame, key=key, width="stretch", on_change=_grid_edited, args=(key, len_q, len_kv, columns),
                unchanged={"edited_rows": {}, "added_rows": [], "deleted_rows": []},
            )  # fmt: skip
        blocked_rows = int((~current.any(axis=1)).sum())
        if blocked_rows:
            st.caption(f"{blocked_rows} query row(s) have no allowed key: their weights are all 0.")
