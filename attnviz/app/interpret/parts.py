"""The Interpretability page's "Score parts" tab: pick a head and a cell of its pattern (click the
heatmap, or type the query and key), and see that pre-softmax score taken apart exactly into
(query part × key part) terms (`attnviz.interp.score_table`, run in a worker through the door), the
largest said in words, which parts move the head's weight onto that key, and a CSV of every term.
A worked example sets everything to an induction head the role scan finds, at a repeated token.
Every control is bound to the URL.
"""

from __future__ import annotations

import dataclasses
import functools
import io

import numpy as np
import streamlit as st

from attnviz import formats, masks
from attnviz.app.frame import door, session
from attnviz.app.frame.link_values import TEXT_LIMITS
from attnviz.app.frame.literal import escape_markdown
from attnviz.app.interpret import tasks, work
from attnviz.interp.score_table import example, head_name, words
from attnviz.plots import heatmaps
from attnviz.plots import interp as interp_plots

URL = "query-params"
TEXT, HEAD, QUERY, KEY = "interp.parts_text", "interp.parts_head", "interp.parts_query", "interp.parts_key"
SHOWN = 16  # parts per side in the heatmaps (the rest folded into one "rest" row and column)
SAID = 5  # terms said in words
PARTNERS = 5  # previous-token heads of the scan a worked example looks among


def score_row(ckpt, framework: str, text: str, layer: int, head: int, query: int, key: int):
    return door.run(
        tasks.score_row, work.source(ckpt), text, layer, head, query, framework, key,
        spinner="Taking the score apart", cache="interp score parts",
    )  # fmt: skip


def parse_head(chosen: str) -> tuple[int, int]:
    """ "L3.H5" → (3, 5)."""
    a, b = formats.parse_head(chosen)
    return a, b


def clicked_cell(points: list[dict]) -> tuple[int, int] | None:
    """The (query, key) of the last clicked cell marker (its `customdata`); None for no click or a
    blocked cell (a key after the query)."""
    if not points or "customdata" not in points[-1]:
        return None
    query, key = (int(v) for v in points[-1]["customdata"][:2])
    return (query, key) if key <= query else None


def cell_clicked(chart_key: str) -> None:
    """The pattern's click: that cell's query and key into the tab's fields."""
    cell = clicked_cell(st.session_state[chart_key].selection.points)
    if cell is not None:
        st.session_state[QUERY], st.session_state[KEY] = cell


def worked_example(ckpt, framework: str, scan_settings: tuple[int, int, int]) -> None:
    """Set the tab's fields to the worked example: the scan's top induction head, at the example's
    repeated token, on the key the induction story predicts (before the widgets are drawn)."""
    scan = work.role_scan(ckpt, framework, *scan_settings)
    layer, head, _ = scan.top("induction", 1)[0]
    ids = ckpt.encode(example.EXAMPLE_TEXT)[0]
    query = example.example_query(ids)
    key = example.induction_target(ids, query)
    st.session_state.update(
        {
            TEXT: example.EXAMPLE_TEXT,
            HEAD: head_name(layer, head),
            QUERY: query,
            KEY: query if key is None else key,
        }
    )


def pattern_figure(pattern: np.ndarray, tokens: list[str], title: str, head: str):
    """The head's `(T, T)` pattern, future keys blocked, with a clickable marker per cell (plotly's
    heatmap cells cannot be selected) whose `customdata` is its (query, key)."""
    T, labels = pattern.shape[0], interp_plots.position_labels(tokens)
    figure = heatmaps.head_grid(
        pattern[None], labels, labels, blocked=~masks.causal(T, T), title=title, clickable=True,
        panel_titles=[head],
    )  # fmt: skip
    if figure.layout.meta["clickable"]:  # trace 1: the markers of the one panel, row by row
        q, k = np.meshgrid(np.arange(T), np.arange(T), indexing="ij")
        # (T·T, 2) as plain lists: a NumPy array travels as a typed array, whose rows reach the
        # click's callback as dicts, not pairs
        figure.data[1].customdata = np.stack([q, k], -1).reshape(-1, 2).tolist()
    return figure


def parts_figure(table: np.ndarray, query_parts: list[str], key_parts: list[str], title: str, value: str):
    """A (query part × key part) table, cut to its `SHOWN` largest parts per side."""
    rows, cols, shown = words.condensed(table, query_parts, key_parts, SHOWN)
    return heatmaps.matrix(
        shown, rows, cols, title=title, value_name=value, x_title="key side", y_title="query side",
    )  # fmt: skip


def parts_csv(row) -> str:
    """Every term: `query_part,key_part,term,lift` (the lift: the term's share of moving the weight
    onto this key), then the score and the table's sum."""
    parts, out = row.parts, io.StringIO()
    out.write("query_part,key_part,term,lift\n")
    for a, qa in enumerate(parts.query_parts):
        for b, kb in enumerate(parts.key_parts):
            out.write(f"{qa},{kb},{parts.table[a, b]:.9g},{row.lift[a, b]:.9g}\n")
    out.write(f"score,,{parts.score:.9g},\ntable sum,,{parts.total:.9g},{row.lift.sum():.9g}\n")
    return out.getvalue()


def partner_line(ckpt, framework: str, parts, scan_settings: tuple[int, int, int]) -> str:
    """Which previous-token head of the role scan (if it has run) gives this score most at the key."""
    hit, scan = door.cached("interp scan", work.source(ckpt), framework, *scan_settings, device=work.device())
    if not hit:
        return "Run the **Head roles** scan (or the worked example) to name the previous-token head behind the key."
    found = example.partner(parts, [(a, b) for a, b, _ in scan.top("previous_token", PARTNERS)])
    if found is None:
        return f"None of the scan's top {PARTNERS} previous-token heads comes before this layer."
    name, share = found
    return (
        f"Of the role scan's top {PARTNERS} previous-token heads, **{name}** gives this score the most through "
        f"its output at the key: its terms sum to **{share:+.2f}** of {parts.score:.2f} (every other key-side "
        f"part together: {parts.score - share:+.2f})."
    )


def parts_tab(ckpt, framework: str, scan_settings: tuple[int, int, int]) -> None:
    """The tab's widgets (bound to the URL), one call into the worker, and its figures."""
    L, H = ckpt.config.num_hidden_layers, ckpt.config.num_attention_heads
    st.markdown(
        "**Why a head attends where it does.** A pre-softmax score `scale · qᵢ · kⱼ` is bilinear in the residual "
        "stream: with each norm's divisor held at its value at that position (and Gemma's QK-norm's), qᵢ is a sum "
        "of parts — the embedding, every earlier head's output, every MLP's, the biases — and so is kⱼ, so the score "
        "splits **exactly** into a table of (query part × key part) terms. Click a cell of the pattern."
    )
    if st.button("Worked example: an induction head found by the role scan", key="interp.parts_example"):
        worked_example(ckpt, framework, scan_settings)
    text = st.text_input(
        "Prompt", example.EXAMPLE_TEXT, max_chars=TEXT_LIMITS[TEXT], key=TEXT, bind=URL,
    )  # fmt: skip
    ids = ckpt.encode(text)[0]
    c1, c2, c3 = st.columns(3)
    chosen = c1.selectbox("Head", [head_name(a, b) for a in range(L) for b in range(H)], key=HEAD, bind=URL)
    layer, head = parse_head(chosen)
    default_q = example.example_query(ids)
    query = int(c2.number_input("Query position", 0, None, default_q, key=QUERY, bind=URL))
    key = int(c3.number_input("Key position", 0, None, max(0, default_q - 1), key=KEY, bind=URL))
    out = work.forward(ckpt, text, framework)
    labels = ckpt.labels(ids)  # readable, as the other tabs show them ("Ġkeeper" → " keeper")
    session.chart(
        pattern_figure(out.attentions[layer, head], labels, "Click a cell: its query row, its key column", chosen),
        width="stretch", key="interp.parts_pattern", selection_mode=("points",),
        on_select=functools.partial(cell_clicked, "interp.parts_pattern"),
    )  # fmt: skip
    row = score_row(ckpt, framework, text, layer, head, query, key)
    show_parts(ckpt, framework, row, scan_settings, labels)


def show_parts(ckpt, framework: str, row, scan_settings: tuple[int, int, int], labels: list[str]) -> None:
    """The split score: its numbers, the table, the words, the lift, the CSV; its tokens read as `labels`
    (the run's tokens are the vocabulary's: a byte-level BPE writes " keeper" as "Ġkeeper")."""
    row = dataclasses.replace(row, parts=dataclasses.replace(row.parts, tokens=list(labels)))
    parts = row.parts

    def token(i: int) -> str:
        return escape_markdown(repr(parts.tokens[i]))

    weight = float(row.weights[list(row.keys).index(parts.key)])
    st.markdown(
        f"{head_name(parts.layer, parts.head)}, query {parts.query} ({token(parts.query)}) → key {parts.key} "
        f"({token(parts.key)}): score **{parts.score:.4f}**, the table's {parts.table.size:,} term{'s' if parts.table.size != 1 else ''} sum{'' if parts.table.size != 1 else 's'} to "
        f"**{parts.total:.4f}**; the head puts weight **{weight:.3f}** on this key."
    )
    st.plotly_chart(
        parts_figure(parts.table, parts.query_parts, parts.key_parts, "The score's terms", "term"),
        width="stretch", key="interp.parts_table",
    )  # fmt: skip
    st.markdown(
        "**The largest terms**\n\n" + "\n".join(f"- {escape_markdown(s)}" for s in words.largest(parts, SAID))
    )
    st.caption(partner_line(ckpt, framework, parts, scan_settings))
    st.markdown(
        "**What moves the weight onto this key.** Each term's value here minus its weighted mean over the keys "
        f"the query sees (weighted by the head's own attention): the lift sums to log w + H(w) = "
        f"**{row.lift.sum():.3f}**; a large positive lift is a part that pulls this key above the others."
    )
    st.plotly_chart(
        parts_figure(row.lift, parts.query_parts, parts.key_parts, "Lift onto this key", "lift"),
        width="stretch", key="interp.parts_lift",
    )  # fmt: skip
    st.download_button(
        "Download every term (CSV)", parts_csv(row), "score_parts.csv", "text/csv", key="interp.parts_csv"
    )
