"""The Decoding page's figures: NumPy in, `go.Figure` out, no Streamlit.

- `query_rows`: every new token's query row over the positions so far, the newest outlined;
- `cache_heatmap`: the K (or V) rows a layer's cache holds, one per position, the newest outlined;
- `time_per_token`: seconds per new token against position, with and without the cache;
- `perplexity_along`, `first_token_share`, `first_token_heads`: the streaming section (cache policies).

Heatmaps are `attnviz.plots.heatmaps.matrix` (its labels, blocked cells and colour bar), with the
newest row outlined in `NEW_COLOR` and labelled "new" beside the plot.
"""

from __future__ import annotations

import itertools

import numpy as np
import plotly.graph_objects as go

from attnviz.plots import heatmaps

NEW_COLOR = "#e65100"  # the new row's outline (orange: no colour scale here uses it)
CACHED_COLOR, UNCACHED_COLOR = "#1565c0", "#c62828"
MAX_WIDTH_LABELS = 8  # feature columns labelled (every k-th above): legible on a phone


def outline_row(fig: go.Figure, row: int, n_cols: int, label: str = "new") -> go.Figure:
    """Outline row `row` of a `heatmaps.matrix` figure (categories: rows top-down, cells ±0.5) and
    write `label` at its right end, outside the plot."""
    fig.add_shape(
        type="rect", xref="x", yref="y", x0=-0.5, x1=n_cols - 0.5, y0=row - 0.5, y1=row + 0.5,
        line={"color": NEW_COLOR, "width": 3}, layer="above", name="new row",
    )  # fmt: skip
    fig.add_annotation(
        x=1, xref="paper", xanchor="left", y=row, yref="y", text=f"<b>{label}</b>", showarrow=False,
        font={"color": NEW_COLOR, "size": 13},
    )  # fmt: skip
    fig.update_layout(margin={**fig.layout.margin.to_plotly_json(), "r": 44})
    return fig


def query_rows(
    values: np.ndarray, missing: np.ndarray, row_labels: list[str], keys: list[str], title: str
) -> go.Figure:
    """`(steps, T)` each new token's attention over the positions so far; the last row is the new one.

    Args:
        values: `(S, T)` weights, 0 where `missing`.
        missing: `(S, T)` True where the key was not in the cache for that row (drawn as blocked).
        row_labels: the S new tokens ("step 3: ␣the"); keys: the T tokens so far.
    """
    fig = heatmaps.matrix(
        values, row_labels, keys, blocked=missing, title=title, colorscale="Blues", diverging=False,
        value_name="weight", x_title="cached key", y_title="new token's query",
    )  # fmt: skip
    fig.update_traces(name="not in the cache yet (later tokens)", selector={"name": "blocked (masked out)"})
    return outline_row(fig, values.shape[0] - 1, values.shape[1])


def cache_heatmap(rows: np.ndarray, labels: list[str], title: str, value_name: str) -> go.Figure:
    """`(Lk, D)` the rows a layer's cache holds for one K/V head (one per position), the last one
    the row this step wrote."""
    width = [str(i) for i in range(rows.shape[1])]
    fig = heatmaps.matrix(
        rows, labels, width, title=title, value_name=value_name, x_title="feature (head width)",
        y_title="cached position", x_label_limit=MAX_WIDTH_LABELS,
    )  # fmt: skip
    return outline_row(fig, rows.shape[0] - 1, rows.shape[1])


def time_per_token(positions: np.ndarray, cached: np.ndarray, uncached: np.ndarray, title: str) -> go.Figure:
    """Milliseconds per new token against its position: one cached step, and one full pass over
    every position so far (what generating without a cache runs for that token)."""
    fig = go.Figure()
    for name, seconds, color in (
        ("without the cache: a full pass over positions 0 … p", uncached, UNCACHED_COLOR),
        ("with the cache: one position over p cached keys", cached, CACHED_COLOR),
    ):
        fig.add_trace(
            go.Scatter(
                x=positions, y=1e3 * np.asarray(seconds), mode="lines+markers", name=name,
                line={"color": color}, hovertemplate="position %{x}: %{y:.3g} ms<extra></extra>",
            )
        )  # fmt: skip
    fig.update_layout(
        title=title,
        xaxis_title="position p of the new token",
        yaxis={"title": "milliseconds per token", "rangemode": "tozero"},
        legend={"orientation": "h", "x": 0, "y": -0.25, "yanchor": "top"},
        height=400,
        margin={"l": 10, "r": 10, "t": 60, "b": 10},
    )
    return fig


SMOOTH = 32  # tokens in the moving mean of a perplexity curve


def perplexity_along(
    nll: dict[str, np.ndarray], edge: int, title: str, local: int | None = None
) -> go.Figure:
    """Perplexity along the text, one line per cache policy: exp of the moving mean of `SMOOTH`
    tokens' NLL `(T − 1,)` (the token at x predicted from what its policy kept), a log y axis, the
    window's edge (`edge`: where eviction starts) and, when given, a local layer's own window."""
    fig = go.Figure()
    for label, values in nll.items():
        k = min(SMOOTH, len(values))
        smooth = np.exp(np.convolve(values, np.ones(k) / k, mode="valid"))  # (T − k,)
        fig.add_trace(go.Scatter(x=np.arange(k, len(values) + 1), y=smooth, mode="lines", name=label))
    fig.add_vline(x=edge, line={"dash": "dash", "color": "#555"}, annotation_text="window full")
    if local is not None and local < len(next(iter(nll.values()), [])):
        fig.add_vline(x=local, line={"dash": "dot", "color": "#999"}, annotation_text=f"local window {local}",
                      annotation_position="bottom right")  # fmt: skip
    fig.update_layout(
        title=title, xaxis_title="token position", yaxis_title=f"perplexity (moving mean of {SMOOTH} tokens)",
        yaxis_type="log", legend={"orientation": "h", "y": -0.25}, margin={"t": 50},
    )  # fmt: skip
    return fig


def first_token_share(first: np.ndarray, title: str, bins: int = 32) -> go.Figure:
    """Each layer's weight on the first token along the text: `first (T − 1, L, H)` averaged over
    the heads and over `bins` stretches of positions, a heatmap of layers × positions (0 … 1)."""
    T, L, _ = first.shape
    edges = np.linspace(0, T, min(bins, T) + 1).astype(int)
    z = np.stack([first[a:b].mean(axis=(0, 2)) for a, b in itertools.pairwise(edges)], axis=1)
    fig = go.Figure(go.Heatmap(z=z, x=edges[:-1], y=np.arange(L), zmin=0, zmax=1, colorscale="Viridis",
                               colorbar={"title": "weight"}))  # fmt: skip
    fig.update_layout(title=title, xaxis_title="token position", yaxis_title="layer", margin={"t": 50})
    return fig


def first_token_heads(first: np.ndarray, title: str) -> go.Figure:
    """`first (T − 1, L, H)` averaged over the text: each layer's (rows) and head's (columns) share."""
    z = first.mean(axis=0)  # (L, H)
    fig = go.Figure(go.Heatmap(z=z, x=np.arange(z.shape[1]), y=np.arange(z.shape[0]), zmin=0, zmax=1,
                               colorscale="Viridis", colorbar={"title": "weight"}))  # fmt: skip
    fig.update_layout(title=title, xaxis_title="head", yaxis_title="layer", margin={"t": 50})
    return fig
