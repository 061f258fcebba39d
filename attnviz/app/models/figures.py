"""The Compare-models page's figures: two `ModelSummary`s in, `go.Figure` out, no Streamlit.

Layers are placed by relative depth, layer / (L − 1), so a 30-layer and an 18-layer model line up
from first (0) to last (1). Each model has its colour; a layer's kind its marker: filled for a
global layer (every earlier token), open for a local one (a sliding window).
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from attnviz.interp.side_by_side import PARTS, ModelSummary
from attnviz.plots.labels import TOOLBAR_PX, hung_title

COLORS = ("#1565c0", "#e65100")  # the first model's, the second's
SYMBOLS = {"global": "circle", "local": "circle-open"}
PART_COLORS = {"embedding": "#8e24aa", "attention": "#1e88e5", "mlp": "#43a047", "norms": "#fdd835",
               "unembedding": "#6d4c41", "other": "#9e9e9e"}  # fmt: skip
TITLE_PX = 30  # the title's band, under the mode bar's
LAYOUT = {"height": 380, "margin": {"l": 10, "r": 10, "t": TOOLBAR_PX + TITLE_PX, "b": 10}}


def _titled(text: str, height: int) -> dict:
    """The layout's title, hung under the band of plotly's mode bar and broken to fit a phone
    (`plots.labels.hung_title`, as every other screen's), with the top margin it takes."""
    title, top = hung_title(text)
    return {"title": title, **LAYOUT, "height": height, "margin": {**LAYOUT["margin"], "t": top}}


def by_depth(
    summaries: tuple[ModelSummary, ...],
    values: list[np.ndarray],
    kinds: list[list[str]],
    title: str,
    y_title: str,
    y_format: str = ".2f",
) -> go.Figure:
    """One value per layer of each model against relative depth: a line through a model's layers,
    a marker per layer kind.

    Args:
        values: `(L,)` per model, in the order of `summaries`; kinds: "local"/"global" per layer.
    """
    fig = go.Figure()
    for s, y, kind, color in zip(summaries, values, kinds, COLORS, strict=False):
        kind = np.array(kind)
        fig.add_trace(go.Scatter(x=s.depth, y=y, mode="lines", line={"color": color, "width": 1},
                                 showlegend=False, hoverinfo="skip"))  # fmt: skip
        for k in ("global", "local"):
            at = np.flatnonzero(kind == k)
            if not at.size:
                continue
            named = "every layer global" if (kind == "global").all() else f"{k} layers"
            fig.add_trace(
                go.Scatter(
                    x=s.depth[at], y=y[at], mode="markers", name=f"{s.name}: {named}",
                    marker={"color": color, "symbol": SYMBOLS[k], "size": 9, "line": {"color": color, "width": 2}},
                    customdata=at, meta={"model": s.name, "kind": k},
                    hovertemplate=f"{s.name}<br>layer %{{customdata}} ({k})<br>%{{y:{y_format}}}<extra></extra>",
                )
            )  # fmt: skip
    fig.update_layout(
        xaxis={"title": "relative depth: layer / (layers − 1)", "range": [-0.03, 1.03]},
        yaxis={"title": y_title, "rangemode": "tozero"},
        legend={"orientation": "h", "x": 0, "y": -0.22, "yanchor": "top"},
        **_titled(title, 430),
    )
    return fig


def parameters(summaries: tuple[ModelSummary, ...]) -> go.Figure:
    """Each model's parameters by where they sit, stacked horizontal bars in millions."""
    fig = go.Figure()
    parts = [p for p in (*PARTS, "other") if any(s.parameters.get(p, 0) for s in summaries)]
    for part in parts:
        counts = np.array([s.parameters.get(part, 0) for s in summaries], dtype=float)
        fig.add_trace(
            go.Bar(
                y=[s.name for s in summaries], x=counts / 1e6, name=part, orientation="h",
                marker={"color": PART_COLORS[part]},
                text=[f"{c / 1e6:.0f} M" if c / s.total >= 0.08 else "" for c, s in zip(counts, summaries, strict=True)],
                textposition="inside", insidetextanchor="middle", textangle=0,
                customdata=[c / s.total for c, s in zip(counts, summaries, strict=True)],
                hovertemplate=f"{part}: %{{x:.1f}} M (%{{customdata:.0%}})<extra>%{{y}}</extra>",
            )
        )  # fmt: skip
    fig.update_layout(
        barmode="stack",
        xaxis_title="millions of parameters",
        yaxis={"autorange": "reversed", "automargin": True},
        legend={"orientation": "h", "x": 0, "y": -0.35, "yanchor": "top", "traceorder": "normal"},
        **_titled("Parameters, and where they sit", 300),
    )
    return fig
