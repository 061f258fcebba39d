"""Figures of the Pretrained page that are not attention maps: next-token probabilities and
what an ablation changed.

An ablation's effect is drawn as a *change* (1 − cosine, KL divergence), from 0 up to a
little above the largest change, so that a change of 0.003 is visible: a cosine of 0.997
drawn on a 0–1 axis looks like no change at all.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from attnviz.plots.labels import safe_labels

BAR_COLOR = "#1f77b4"
CHANGE_COLOR = "#d62728"


def next_token_bars(rows: list[tuple[str, float]], title: str) -> go.Figure:
    """Horizontal bars of the most likely next tokens.

    Args:
        rows: `(token, probability)` pairs, most likely first.
        title: the figure's title.
    """
    fig = go.Figure(
        go.Bar(
            x=[p for _, p in rows],
            y=safe_labels([repr(t) for t, _ in rows]),
            orientation="h",
            text=[f"{p:.1%}" for _, p in rows],
            textposition="auto",
            marker_color=BAR_COLOR,
            hovertemplate="%{y}: %{x:.2%}<extra></extra>",
        )
    )
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_xaxes(title="probability", range=[0, 1], tickformat=".0%")
    fig.update_layout(
        title=title, height=max(240, 28 * len(rows) + 110), margin={"l": 10, "r": 10, "t": 50, "b": 10}
    )
    return fig


def change_bars(tokens: list[str], change: np.ndarray, *, metric: str, title: str, x_title: str) -> go.Figure:
    """Each position's change after an ablation, on an axis from 0 to just above the largest.

    Args:
        tokens: the T positions' labels.
        change: `(T,)` changes ≥ 0 (1 − cosine, or KL divergence in nats); 0: unchanged.
        metric: the y axis title ("1 − cosine", "KL (nats)").
        title: the figure's title.
        x_title: the x axis title.
    """
    change = np.asarray(change, np.float64)
    top = float(change.max()) if change.size else 0.0
    fig = go.Figure(
        go.Bar(
            x=safe_labels(tokens),
            y=change,
            marker_color=CHANGE_COLOR,
            text=[f"{v:.2g}" for v in change],
            textposition="outside",
            cliponaxis=False,
            hovertemplate=f"%{{x}}: {metric} %{{y:.3g}}<extra></extra>",
        )
    )
    fig.update_xaxes(type="category", tickangle=-45, title=x_title)
    fig.update_yaxes(
        title=metric, range=[0, top * 1.2 if top > 0 else 1], rangemode="tozero", exponentformat="e"
    )
    fig.update_layout(title=title, height=380, margin={"t": 60, "l": 10, "r": 10, "b": 10})
    fig.layout.meta = {"largest": top}
    return fig
