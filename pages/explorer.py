"""Multi-head explorer: every head's attention in one figure, summaries, the shape ledger."""

import functools

import streamlit as st

from attnviz import STEP_DOCS, heads, masks
from attnviz.app import controls
from attnviz.app.explorer import figures, preview, summary
from attnviz.app.frame import session
from attnviz.app.frame.pages import by_name
from attnviz.app.frame.shell import routed
from attnviz.frameworks import label
from attnviz.plots import heatmaps
from attnviz.plots.labels import LABEL_LIMIT, duration, kv_group_titles

routed("explorer")  # inside app.py's shell, also when Streamlit's pages/ routing ran this file alone
VALUES_TOGGLE_LIMIT = 12  # positions up to which cell values can be written into the panels


URL = "query-params"  # bind: a widget's key is its URL parameter, so a link keeps the view

st.title("Multi-head explorer")
cfg, spec, q_labels, k_labels = controls.configure()
if not controls.ready(cfg):  # a server's first visitor: the reference's chart first, while a worker starts
    preview.draw_then_run(cfg, q_labels, k_labels)
result, timing = controls.run_and_timing(cfg)  # timing: steady state (attnviz.run.time_attention)
b = controls.batch_item(spec)

if cfg["weights"] == "random":
    st.info(
        "Random weights show no learned pattern: with random W_q and W_k every head spreads its "
        "attention almost evenly, and in sentence mode the words are hashed to random vectors, so "
        "nothing here reflects their meaning. Hand-built heads show four patterns; heads that learned "
        "something are on the Pretrained model page.",
        icon=":material/info:",
    )
    session.button(
        "Show hand-built heads on a sentence (causal mask)",
        key="explorer.pattern",
        on_click=controls.choose,
        args=(controls.PATTERN,),
        icon=":material/auto_awesome:",
    )
else:
    session.button(
        "Random weights instead",
        key="explorer.random",
        on_click=controls.choose,
        args=({"weights": "random"},),
    )
st.page_link(
    by_name("pretrained").path,
    label="Pretrained model: real heads of a trained model",
    icon=":material/psychology:",
)
if cfg["mode"] == "cross":  # the picture cross-attention is for: a decoder reading an encoder
    st.page_link(by_name("speech").path, label="Cross-attention in a real model: Whisper", icon=":material/graphic_eq:",
                 help="Queries from the decoder (the words written), keys and values from the encoder (the sound)")  # fmt: skip

with st.container(horizontal=True, gap="medium", key="explorer.metrics"):
    st.metric("Framework", label(result.framework), width="content")  # 170 px cut "TensorFlow" by 4 px
    st.metric("Device", result.device.upper(), help=result.device_name, width=110)
    st.metric("Forward pass", duration(timing.median_s), help=timing.label, width=170)
st.caption(
    f"Forward pass: steady state — {timing.label}; the interquartile range is "
    f"{duration(timing.p25_s)} to {duration(timing.p75_s)}. It includes each framework's eager dispatch of "
    "every operation (PyTorch and TensorFlow differ most there at small sizes), not the framework's "
    f"start-up. The same measurement as `python -m attnviz.bench --threads {timing.threads}`. "
    f"Attention weights: shape (B, H, Lq, Lk) = {tuple(result.weights.shape)}."
)
st.page_link(
    by_name("timing").path,
    label="Timing: the fair comparison",  # a link's label does not wrap: a longer one was cut at 390 px
    icon=":material/timer:",
    help="attnviz against each framework's own attention, eager and compiled, on the Timing page",
)
if result.empty_rows[b].any():
    rows = controls.escape_markdown(", ".join(q_labels[i] for i in result.empty_rows[b].nonzero()[0][:20]))
    st.warning(f"Query rows with no allowed key (all weights 0, context 0): {rows}")

recorded = {s.name: s for s in result.steps}
weights, after_dropout = result.weights[b], False
n_tokens = max(spec.len_q, spec.len_kv)
with st.container(horizontal=True, gap="medium", vertical_alignment="bottom", key="explorer.view"):
    if "dropout" in recorded:
        after_dropout = (
            st.radio(
                "Weights shown",
                ["before dropout", "after dropout"],
                horizontal=True,
                key="explorer.dropout",
                bind=URL,
                width="content",
            )
            == "after dropout"
        )
    cols = "auto"
    if spec.n_heads > 1:
        cols = st.selectbox(
            "Panels per row",
            ["auto", 1, 2, 3, 4],
            key="explorer.cols",
            bind=URL,
            width=140,
            help="auto: two up to 24 tokens, one above, so every label stays readable.",
        )
    show_values = n_tokens <= VALUES_TOGGLE_LIMIT and st.toggle(
        "Show values in the cells", key="explorer.values", bind=URL
    )
if after_dropout:
    weights = recorded["dropout"].value[b]
    st.caption(
        f"After dropout (training mode, p = {spec.dropout:g}): each weight was zeroed with probability p and "
        f"the rest multiplied by 1/(1−p) = {1 / (1 - spec.dropout):.3g}, so rows no longer sum to 1. These "
        "are the weights that multiply V in training."
    )
elif "dropout" in recorded:
    st.caption(
        "Before dropout: the softmax weights; each row sums to 1. Training applies dropout to them next."
    )
elif spec.dropout > 0:
    st.caption(f"Dropout p = {spec.dropout:g} is set, but training mode is off: no dropout is applied.")

allowed = masks.from_spec(spec)
blocked = None if allowed is None else ~allowed[b]
titles = heads.panel_titles(spec.n_heads) if cfg.get("weights") == "interpretable" else None
grouped = spec.n_kv_heads < spec.n_heads  # grouped K/V heads: one row of panels per K/V head
per_row = spec.n_heads // spec.n_kv_heads if grouped and cols == "auto" else None if cols == "auto" else cols
fig = figures.kept(
    ("heads", controls.run_key(cfg), b, after_dropout, cols, show_values),
    lambda: heatmaps.head_grid(
        weights,
        q_labels,
        k_labels,
        blocked=blocked,
        cols=per_row,
        show_values=show_values,
        clickable=True,
        panel_titles=kv_group_titles(spec.n_heads, spec.n_kv_heads, titles) if grouped else titles,
    ),
)
st.caption(
    f"Batch item {b}: rows are queries, columns are keys; one panel per head"
    + (
        f", one row of panels per K/V head ({spec.n_kv_heads} shared by {spec.n_heads} query heads). "
        if grouped
        else ". "
    )
    + ("Click a panel to enlarge it. " if fig.layout.meta["clickable"] else "")
    + fig.layout.meta["color_scale"]
    + (" Grey cells marked ✕ are blocked by the mask (weight exactly 0)." if blocked is not None else "")
    + (
        f" Values are written when a row of panels is at most {heatmaps.VALUES_ACROSS} cells across (legible on "
        "a projector): choose fewer panels per row."
        if show_values and not fig.layout.meta["values_written"]
        else ""
    )
)
if fig.layout.meta["downsampled"] != [1, 1]:
    br, bc = fig.layout.meta["downsampled"]
    st.caption(f"Large configuration: each cell shows the mean of a {br} × {bc} block of weights.")
elif fig.layout.meta["label_stride"] > 1:
    st.caption(
        f"More than {LABEL_LIMIT} tokens: every {fig.layout.meta['label_stride']}th query is labelled, "
        "and as many keys as the width holds."
    )
session.chart(
    fig,
    width="stretch",
    key="explorer.heads",
    # A callback from attnviz.app.frame.widgets, not a function of this page: the page's own would
    # keep all of its variables (the result arrays) alive for the whole session.
    on_select=functools.partial(controls.enlarge_clicked, "explorer.heads", "explorer.enlarge", spec.n_heads),
    selection_mode="points",
    config={"displayModeBar": False},
)

options = ["none"] + [f"head {h}" for h in range(spec.n_heads)]
if st.session_state.get("explorer.enlarge", "none") not in options:  # fewer heads than before
    st.session_state["explorer.enlarge"] = "none"
enlarged = st.selectbox("Enlarge one head", options, key="explorer.enlarge", bind=URL, width=200)
if enlarged != "none":
    h = int(enlarged.split()[1])
    small = spec.len_q <= heatmaps.VALUES_LIMIT and spec.len_kv <= heatmaps.VALUES_LIMIT
    st.plotly_chart(
        heatmaps.matrix(
            weights[h],
            q_labels,
            k_labels,
            blocked=blocked,
            title=f"head {h}",
            diverging=False,
            colorscale="Blues",
            value_name="weight",
            zmax=fig.layout.coloraxis.cmax,
            y_title="query",
            x_title="key",
            show_values=small,
        ),
        width="stretch",
        key="explorer.enlarged",
    )
    if small:
        st.caption("Each cell shows its weight; the colour scale is the one of the panels above.")

left, right = st.columns([3, 2])
with left:
    st.subheader("Per-head summary")
    rows, caption = summary.table(result.weights[b], k_labels, None if allowed is None else allowed[b])
    st.dataframe(rows, hide_index=True, width="stretch")
    st.caption(caption)
with right:
    st.subheader("Merged output")
    st.caption("output: one row per query, d_model columns")
    out = figures.kept(
        ("output", controls.run_key(cfg), b),
        lambda: heatmaps.matrix(
            result.output[b],
            q_labels,
            None,
            value_name="value",
            y_title="query",
            x_title="feature",
            x_label_limit=8,
        ),
    )
    st.plotly_chart(out, width="stretch", key="explorer.output")

st.subheader(f"Shape ledger — {label(result.framework)}")
st.dataframe(
    [
        {"step": s.name, "what": STEP_DOCS[s.name][0], "shape": str(s.shape), "code": s.code}
        for s in result.steps
    ],
    hide_index=True,
    width="stretch",
    height=controls.table_height(len(result.steps)),
)

controls.downloads(spec, result, q_labels, k_labels)
