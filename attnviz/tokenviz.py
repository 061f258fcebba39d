"""bertviz-style views of a model's attention over its tokens: the head view and the model view.

NumPy in, `plotly.graph_objects.Figure` out, like `attnviz.viz` (whose
`safe_labels` and `_fit` they use). No Streamlit, no framework.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from attnviz.viz import MAX_CELLS_PER_FIGURE, _fit, safe_labels

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


def head_view(attn: np.ndarray, tokens, heads, *, threshold: float = 0.05, levels: int = 5) -> go.Figure:
    """bertviz-style head view: a line from each token (left) to each token it attends to (right).

    Args:
        attn: `(H, T, T)` one layer's attention.
        heads: which heads to draw, each in its own colour.
        threshold: weights below this are not drawn.
        levels: line opacity is the weight, quantised to this many levels (one trace per level and head).

    Returns:
        A figure with the tokens as text on both sides.
    """
    T = attn.shape[-1]
    labels = safe_labels(tokens)
    y = -np.arange(T, dtype=float)
    fig = go.Figure()
    for h in heads:
        w = attn[h]
        bins = np.minimum((w * levels).astype(int), levels - 1)  # (T, T): 0 .. levels-1
        for level in reversed(range(levels)):  # strongest first, so it carries the legend entry
            src, dst = np.nonzero((bins == level) & (w >= threshold))
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
                    showlegend=not any(t.legendgroup == f"head {h}" for t in fig.data),
                    name=f"head {h}",
                    legendgroup=f"head {h}",
                    line={"color": HEAD_COLORS[h % len(HEAD_COLORS)], "width": 2},
                    opacity=((level + 1) / levels) ** 1.5,  # faint for weak weights
                )
            )
    for x, side in ((-0.03, "left"), (1.03, "right")):  # labels outside the lines
        fig.add_trace(
            go.Scatter(
                x=[x] * T,
                y=y,
                mode="text",
                text=labels,
                textposition=f"middle {side}",
                showlegend=False,
                hoverinfo="skip",
            )
        )
    fig.update_xaxes(visible=False, range=[-0.9, 1.9])
    fig.update_yaxes(visible=False, range=[-T + 0.3, 0.7])
    fig.update_layout(
        title="Head view: each token (left) to the tokens it attends to (right); opacity = weight",
        height=max(360, 22 * T + 120),
        plot_bgcolor="white",
        margin={"l": 10, "r": 10, "t": 60, "b": 10},
        legend={"orientation": "h", "y": -0.02},
    )
    return fig


def model_view(attentions: np.ndarray, max_cells: int = 4 * MAX_CELLS_PER_FIGURE) -> go.Figure:
    """Every layer × head as a thumbnail in one figure (rows: layers, columns: heads).

    Above `max_cells` cells in total the maps are block-averaged (`layout.meta["downsampled"]`).
    """
    L, H = attentions.shape[:2]
    attentions, _, _, block = _fit(np.asarray(attentions, np.float64), None, None, max_cells)
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
                    hovertemplate=f"layer {layer}, head {h}<br>query %{{y}} → key %{{x}}<br>"
                    "weight %{z:.3f}<extra></extra>",
                ),
                row=layer + 1,
                col=h + 1,
            )
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False, autorange="reversed")
    fig.update_layout(
        title="Model view: every layer (rows) × head (columns)",
        coloraxis={"colorscale": "Blues", "cmin": 0, "cmax": 1, "showscale": False},
        height=max(300, 70 * L + 80),
        margin={"l": 30, "r": 30, "t": 70, "b": 10},
        meta={"downsampled": list(block), "panels": L * H},
    )
    return fig
