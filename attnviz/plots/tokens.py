"""bertviz-style views of a model's attention over its tokens: the head view and the model view.

NumPy in, `plotly.graph_objects.Figure` out, like `attnviz.plots.heatmaps`
(they share `labels` and `cells`). No Streamlit, no framework.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from attnviz.plots.cells import MAX_CELLS_PER_FIGURE, fit
from attnviz.plots.labels import safe_labels

HEAD_COLORS = [
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
    "#393b79",
    "#ad494a",
    "#637939",
    "#8c6d31",
    "#843c39",
    "#7b4173",
]


DIRECTIONS = ("out", "in")  # a focus token's lines: what it attends to, what attends to it
DIRECTION_TEXT = {"out": "what {} attends to", "in": "what attends to {}"}
QUERY_SIDE, KEY_SIDE = 0, 1  # customdata[0] of a token marker


def head_view(
    attn: np.ndarray,
    tokens,
    heads,
    *,
    focus: int | None = None,
    direction: str = "out",
    threshold: float = 0.05,
    levels: int = 5,
) -> go.Figure:
    """bertviz-style head view: a line from each token (left) to each token it attends to (right).

    Every token is a clickable marker on both sides, with `customdata`
    `[side, index]` (side 0: the query column on the left, 1: the key column
    on the right), so a chart selection names the token and the side.

    Args:
        attn: `(H, T, T)` one layer's attention.
        heads: which heads to draw, each in its own colour.
        focus: a token index: draw only its lines, with each weight written
            beside the tokens at the other end. None: every line.
        direction: with `focus`, "out" — what the token attends to (its row) —
            or "in" — which tokens attend to it (its column).
        threshold: weights below this are not drawn.
        levels: line opacity is the weight, quantised to this many levels (one trace per level and head).

    Returns:
        A figure with the tokens as text on both sides; `layout.meta` holds `focus` and `direction`.
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"direction: got {direction!r}; allowed: 'out' or 'in'.")
    T = attn.shape[-1]
    if focus is not None and not 0 <= focus < T:
        raise ValueError(f"focus: got {focus!r}; allowed: None or a token index in [0, {T - 1}].")
    keep = np.ones((T, T), bool)  # (query, key) pairs to draw
    if focus is not None:
        keep[:] = False
        if direction == "out":
            keep[focus, :] = True
        else:
            keep[:, focus] = True
    y = -np.arange(T, dtype=float)
    fig = go.Figure()
    for h in heads:
        fig.add_trace(  # the legend entry, at full strength whatever the weights drawn
            go.Scatter(
                x=[None],
                y=[None],
                mode="lines",
                name=f"head {h}",
                legendgroup=f"head {h}",
                line={"color": HEAD_COLORS[h % len(HEAD_COLORS)], "width": 3},
                hoverinfo="skip",
            )
        )
        _head_lines(fig, attn[h], h, keep, y, threshold, levels)
    _token_markers(fig, attn, tokens, heads, focus, direction, y)
    labels = safe_labels(tokens)
    title = "Head view" if focus is None else f"Head view: {DIRECTION_TEXT[direction].format(labels[focus])}"
    fig.update_xaxes(visible=False, range=[-0.9, 1.9], fixedrange=True)
    fig.update_yaxes(visible=False, range=[-T + 0.3, 0.7], fixedrange=True)
    fig.update_layout(
        title=title,
        height=max(360, 22 * T + 120),
        plot_bgcolor="white",
        margin={"l": 10, "r": 10, "t": 60, "b": 10},
        legend={"orientation": "h", "y": -0.02},
        hovermode="closest",
        hoverdistance=60,
        dragmode=False,
        meta={"focus": focus, "direction": direction},
    )
    return fig


def _head_lines(fig, w, h, keep, y, threshold, levels) -> None:
    bins = np.minimum((w * levels).astype(int), levels - 1)  # (T, T): 0 .. levels-1
    for level in reversed(range(levels)):  # strongest first, so it carries the legend entry
        src, dst = np.nonzero((bins == level) & (w >= threshold) & keep)
        if not len(src):
            continue
        xs = np.column_stack([np.zeros(len(src)), np.ones(len(src)), np.full(len(src), np.nan)]).ravel()
        ys = np.column_stack([y[src], y[dst], np.full(len(src), np.nan)]).ravel()
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="lines",
                hoverinfo="skip",
                showlegend=False,
                name=f"head {h}",
                legendgroup=f"head {h}",
                line={"color": HEAD_COLORS[h % len(HEAD_COLORS)], "width": 2},
                opacity=((level + 1) / levels) ** 1.5,  # faint for weak weights
            )
        )


def _token_markers(fig, attn, tokens, heads, focus, direction, y) -> None:
    """Clickable tokens on both sides; with a focus, the weights written beside the far side."""
    T = len(y)
    labels = safe_labels(tokens)
    far_side = KEY_SIDE if direction == "out" else QUERY_SIDE
    for side, x, textside in ((QUERY_SIDE, -0.03, "left"), (KEY_SIDE, 1.03, "right")):
        text = list(labels)
        if focus is not None:
            text[focus] = f"<b>{labels[focus]}</b>"
            if side == far_side:
                for i in range(T):
                    row, col = (focus, i) if direction == "out" else (i, focus)
                    values = " ".join(
                        f"<span style='color:{HEAD_COLORS[h % len(HEAD_COLORS)]}'>{attn[h, row, col]:.2f}</span>"
                        for h in heads
                    )
                    text[i] = f"{values} {text[i]}" if side == QUERY_SIDE else f"{text[i]} {values}"
        highlight = [focus == i and (side != far_side) for i in range(T)]
        fig.add_trace(
            go.Scatter(
                x=[x] * T,
                y=y,
                mode="markers+text",
                text=text,
                textposition=f"middle {textside}",
                hovertext=labels,
                customdata=[[side, i] for i in range(T)],
                marker={
                    "size": [12 if h else 8 for h in highlight],
                    "color": ["#212121" if h else "#bdbdbd" for h in highlight],
                },
                selected={"marker": {"opacity": 1}},
                unselected={"marker": {"opacity": 1}, "textfont": {"color": "#212121"}},
                showlegend=False,
                name="queries" if side == QUERY_SIDE else "keys",
                hovertemplate=("query" if side == QUERY_SIDE else "key")
                + " %{customdata[1]}: %{hovertext}<br>click: "
                + ("what it attends to" if side == QUERY_SIDE else "which tokens attend to it")
                + "<extra></extra>",
            )
        )


def model_view(
    attentions: np.ndarray,
    max_cells: int = 4 * MAX_CELLS_PER_FIGURE,
    *,
    selected: tuple[int, int] | None = None,
    ablated=(),
    click: str = "enlarge",
) -> go.Figure:
    """Every layer × head as a thumbnail in one figure (rows: layers, columns: heads).

    Each thumbnail carries one invisible, clickable marker over its whole area
    with `customdata` `[layer, head]`, so a chart selection names the
    thumbnail; `selected` (layer, head) is outlined. Above `max_cells` cells in
    total the maps are block-averaged (`layout.meta["downsampled"]`).
    `ablated` (layer, head) pairs are crossed out in black (`layout.meta["ablated"]`);
    `click` is what the hover text says a click does ("enlarge" or "ablate").
    """
    L, H = attentions.shape[:2]
    attentions, _, _, block = fit(np.asarray(attentions, np.float64), None, None, max_cells)
    n_rows, n_cols = attentions.shape[-2:]
    fig = make_subplots(
        rows=L,
        cols=H,
        horizontal_spacing=0.004,
        vertical_spacing=0.01,
        row_titles=[f"L{i}" for i in range(L)],
        column_titles=[f"H{h}" for h in range(H)],
    )
    for layer in range(L):
        for h in range(H):
            fig.add_trace(
                go.Heatmap(
                    z=attentions[layer, h],
                    coloraxis="coloraxis",
                    name=f"layer {layer} head {h}",
                    hoverinfo="skip",
                ),
                row=layer + 1,
                col=h + 1,
            )
            fig.add_trace(  # the click target: one marker larger than the thumbnail, clipped to it
                go.Scatter(
                    x=[(n_cols - 1) / 2],
                    y=[(n_rows - 1) / 2],
                    mode="markers",
                    marker={"size": 400, "opacity": 0},
                    selected={"marker": {"opacity": 0}},
                    unselected={"marker": {"opacity": 0}},
                    customdata=[[layer, h]],
                    showlegend=False,
                    name=f"layer {layer} head {h}",
                    hovertemplate=f"layer {layer}, head {h}: click to {click}<extra></extra>",
                ),
                row=layer + 1,
                col=h + 1,
            )
    if selected is not None:
        layer, h = selected
        axis = layer * H + h + 1
        suffix = "" if axis == 1 else str(axis)
        fig.add_shape(
            type="rect",
            xref=f"x{suffix} domain",
            yref=f"y{suffix} domain",
            x0=-0.04,  # just outside the thumbnail, so the outline hides none of its cells
            x1=1.04,
            y0=-0.04,
            y1=1.04,
            line={"color": "#d62728", "width": 2},
        )
    ablated = sorted({(int(a), int(b)) for a, b in ablated})
    for layer, h in ablated:
        axis = layer * H + h + 1
        suffix = "" if axis == 1 else str(axis)
        for x0, x1 in ((0, 1), (1, 0)):  # a cross over the thumbnail: this head is ablated
            fig.add_shape(
                type="line",
                xref=f"x{suffix} domain",
                yref=f"y{suffix} domain",
                x0=x0,
                x1=x1,
                y0=0,
                y1=1,
                line={"color": "black", "width": 2},
            )
    # fixed ranges: autorange would pad the axes for the large click markers
    fig.update_xaxes(visible=False, fixedrange=True, range=[-0.5, n_cols - 0.5])
    fig.update_yaxes(visible=False, fixedrange=True, range=[n_rows - 0.5, -0.5])  # row 0 on top
    fig.update_layout(
        title="Model view: layers × heads",
        coloraxis={"colorscale": "Blues", "cmin": 0, "cmax": 1, "showscale": False},
        height=max(300, 70 * L + 80),
        margin={"l": 30, "r": 30, "t": 70, "b": 10},
        hovermode="closest",
        dragmode=False,
        meta={
            "downsampled": list(block),
            "panels": L * H,
            "selected": None if selected is None else list(selected),
            "ablated": [list(p) for p in ablated],
        },
    )
    return fig


def neuron_figure(view, tokens, query: int) -> go.Figure:
    """bertviz's neuron view of one query as two heatmaps and three bar rows.

    Args:
        view: an `attnviz.interp.neuron.NeuronView` (q, k, q ⊙ k, scores, scaled, masked, weights).
        tokens: the `T` key tokens (every one is labelled).
        query: the query token's index.

    Returns:
        Rows: the query vector q over each key vector k_j (heatmap, dimensions across), q ⊙ k_j
        (its rows sum to the scores), then bars of the score q·k_j, the scaled (and masked)
        score, and the softmax. Masked keys are marked ✕. `layout.meta` holds `query`, `scores`,
        `weights` and `masked` (indices of masked keys).
    """
    labels = safe_labels(tokens)
    T, Dk = view.k.shape
    dims = [f"d{i}" for i in range(Dk)]
    masked = np.zeros(T, bool) if view.masked is None else ~np.isfinite(view.masked)
    fig = make_subplots(
        rows=5,
        cols=1,
        row_heights=[T + 1.5, T, 5, 5, 5],
        vertical_spacing=min(0.1, 95 / (22 * (2 * T + 1) + 3 * 170 + 160)),
        subplot_titles=[
            f"query q ({labels[query]}) and each key k",
            "q ⊙ k (each row sums to the score)",
            "score q·k",
            "scaled score" + (" (✕ masked: −∞)" if masked.any() else ""),
            "softmax: the attention weights",
        ],
    )
    qk_rows = np.vstack([view.q[None], view.k])
    limit = float(np.abs(qk_rows).max()) or 1.0
    fig.add_trace(
        go.Heatmap(
            z=qk_rows,
            x=dims,
            y=[f"q: {labels[query]}", *(f"k: {t}" for t in labels)],
            colorscale="RdBu",
            zmid=0,
            zmin=-limit,
            zmax=limit,
            showscale=False,
            hovertemplate="%{y}, %{x}: %{z:.3f}<extra></extra>",
        ),
        row=1,
        col=1,
    )
    limit = float(np.abs(view.qk).max()) or 1.0
    fig.add_trace(
        go.Heatmap(
            z=view.qk,
            x=dims,
            y=[f"q⊙k: {t}" for t in labels],
            colorscale="PuOr",
            zmid=0,
            zmin=-limit,
            zmax=limit,
            showscale=False,
            hovertemplate="%{y}, %{x}: %{z:.3f}<extra></extra>",
        ),
        row=2,
        col=1,
    )
    scaled = np.where(
        masked, 0.0, view.scaled if view.masked is None else np.nan_to_num(view.masked, neginf=0)
    )
    rows = [
        (view.scores, ["" for _ in range(T)], "#1f77b4"),
        (scaled, ["✕" if m else "" for m in masked], "#ff7f0e"),
        (view.weights, [f"{w:.2f}" for w in view.weights], "#2ca02c"),
    ]
    for i, (values, text, color) in enumerate(rows):
        fig.add_trace(
            go.Bar(
                x=labels,
                y=values,
                text=text,
                textposition="outside",
                marker_color=color,
                showlegend=False,
                hovertemplate="%{x}: %{y:.4f}<extra></extra>",
            ),
            row=3 + i,
            col=1,
        )
    for r in (1, 2):
        fig.update_yaxes(autorange="reversed", row=r, col=1)
        fig.update_xaxes(showticklabels=Dk <= 16, row=r, col=1)
    for r in (3, 4, 5):
        fig.update_xaxes(type="category", tickangle=-45, row=r, col=1)
    fig.update_yaxes(range=[0, 1.15], row=5, col=1)
    fig.update_layout(
        height=int(22 * (2 * T + 1) + 3 * 170 + 160 + 4 * 40),
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
        dragmode=False,
        meta={
            "query": int(query),
            "scores": [float(v) for v in view.scores],
            "weights": [float(v) for v in view.weights],
            "masked": [int(j) for j in np.flatnonzero(masked)],
        },
    )
    return fig
