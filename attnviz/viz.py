"""Figure builders: NumPy in, `plotly.graph_objects.Figure` out. No Streamlit, no framework.

Every label that may come from a user (tokens, titles) goes through
`safe_labels`, because plotly renders a subset of HTML in tick labels and
hover text.
"""

from __future__ import annotations

import html
import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from attnviz.analysis import block_labels, block_mean

MAX_CELLS_PER_FIGURE = 65_536  # above this, heatmaps are block-averaged
BLOCKED_COLOR = "#9e9e9e"
_ZW = "\u200b"  # zero-width space: keeps repeated words apart on a categorical axis


def safe_labels(labels) -> list[str]:
    """HTML-escaped, and made unique (repeats get invisible suffixes) so that a
    repeated word keeps its own row on a categorical axis."""
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        text = html.escape(str(label), quote=False)  # plotly decodes &lt; &gt; &amp; but shows &quot; as is
        n = seen.get(text, 0)
        seen[text] = n + 1
        out.append(text + _ZW * n)
    return out


def positions(n: int) -> list[str]:
    return [str(i) for i in range(n)]


def _grid_shape(n: int, aspect: float) -> tuple[int, int]:
    """Rows and columns of facets: 4 across, fewer when panels are wide (aspect = Lk / Lq)."""
    cols = max(1, min(n, round(4 / math.sqrt(max(aspect, 1.0)))))
    return math.ceil(n / cols), cols


def _fit(values: np.ndarray, q_labels, k_labels, max_cells: int):
    """Block-average `(..., Lq, Lk)` to at most `max_cells` cells in total.

    Returns:
        The values, the row and column labels (positions when None; escaped, one per block) and
        the block sizes (1, 1 when nothing was averaged).
    """
    n_panels = int(np.prod(values.shape[:-2])) or 1
    lq, lk = values.shape[-2:]
    q_labels = positions(lq) if q_labels is None else list(q_labels)
    k_labels = positions(lk) if k_labels is None else list(k_labels)
    per_panel = max(16, max_cells // n_panels)
    if lq * lk <= per_panel:
        return values, safe_labels(q_labels), safe_labels(k_labels), (1, 1)
    side = math.sqrt(per_panel / (lq * lk))
    reduced, br, bc = block_mean(values, max(1, int(lq * side)), max(1, int(lk * side)))
    return reduced, safe_labels(block_labels(q_labels, br)), safe_labels(block_labels(k_labels, bc)), (br, bc)


def head_grid(
    weights: np.ndarray,
    q_labels=None,
    k_labels=None,
    *,
    title: str = "Attention weights per head",
    colorscale: str = "Blues",
    zmin: float = 0.0,
    zmax: float | None = None,
    value_name: str = "weight",
    max_cells: int = MAX_CELLS_PER_FIGURE,
) -> go.Figure:
    """All heads' `(Lq, Lk)` maps as facets of one figure with one colour scale.

    Args:
        weights: `(H, Lq, Lk)`.
        q_labels, k_labels: names of queries (rows) and keys (columns);
            positions by default.
        max_cells: above this many cells in total, blocks are averaged and
            `fig.layout.meta["downsampled"]` says by how much.

    Returns:
        A figure with one heatmap trace per head (trace `name` "head h").
    """
    H = weights.shape[0]
    values, q_names, k_names, block = _fit(np.asarray(weights, np.float64), q_labels, k_labels, max_cells)
    rows, cols = _grid_shape(H, values.shape[2] / values.shape[1])
    fig = make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=[f"head {h}" for h in range(H)],
        horizontal_spacing=min(0.06, 0.5 / cols),
        vertical_spacing=min(0.12, 0.6 / rows),
    )
    for h in range(H):
        fig.add_trace(
            go.Heatmap(
                z=values[h],
                x=k_names,
                y=q_names,
                coloraxis="coloraxis",
                name=f"head {h}",
                hovertemplate=f"head {h}<br>query %{{y}}<br>key %{{x}}<br>{value_name} %{{z:.4g}}"
                "<extra></extra>",
            ),
            row=h // cols + 1,
            col=h % cols + 1,
        )
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_xaxes(type="category", tickangle=-45)
    top = float(np.nanmax(values)) if values.size else 1.0
    fig.update_layout(
        title=title + (f" — block-averaged {block[0]}×{block[1]}" if block != (1, 1) else ""),
        coloraxis={
            "colorscale": colorscale,
            "cmin": zmin,
            "cmax": zmax if zmax is not None else max(top, 1e-12),
            "colorbar": {"title": {"text": value_name}},
        },
        height=max(380, 300 * rows),
        margin={"l": 40, "r": 20, "t": 80, "b": 40},
        meta={"downsampled": list(block), "panels": H},
    )
    return fig


def matrix(
    values: np.ndarray,
    row_labels=None,
    col_labels=None,
    *,
    title: str = "",
    colorscale: str = "RdBu",
    diverging: bool = True,
    value_name: str = "value",
    x_title: str | None = None,
    y_title: str | None = None,
    max_cells: int = MAX_CELLS_PER_FIGURE,
) -> go.Figure:
    """One `(R, C)` matrix as a heatmap; -inf cells (blocked) drawn grey and marked ✕.

    Returns:
        A figure whose first trace is the heatmap (blocked cells are None in
        `z`); when cells are blocked, a second trace marks them.
    """
    values = np.asarray(values, np.float64)
    R, C = values.shape
    blocked = np.isneginf(values)
    shown = np.where(blocked, np.nan, values)
    shown, rows, cols, block = _fit(shown, row_labels, col_labels, max_cells)
    finite = shown[np.isfinite(shown)]
    bound = float(np.abs(finite).max()) if finite.size else 1.0
    zrange = {"zmid": 0.0} if diverging else {"zmin": float(finite.min()) if finite.size else 0.0}
    fig = go.Figure(
        go.Heatmap(
            z=np.where(np.isfinite(shown), shown, None) if blocked.any() else shown,
            x=cols,
            y=rows,
            colorscale=colorscale,
            reversescale=diverging,
            hoverongaps=False,
            colorbar={"title": {"text": value_name}},
            hovertemplate=f"row %{{y}}<br>column %{{x}}<br>{value_name} %{{z:.4f}}<extra></extra>",
            **({"zmin": -bound, "zmax": bound} if diverging else zrange),
        )
    )
    if blocked.any() and block == (1, 1):
        r, c = np.nonzero(blocked)
        fig.add_trace(
            go.Scatter(
                x=[cols[j] for j in c],
                y=[rows[i] for i in r],
                mode="text",
                text=["✕"] * len(r),
                textfont={"color": "#424242", "size": 12 if max(R, C) <= 24 else 8},
                name="blocked (−∞)",
                hovertemplate="row %{y}<br>column %{x}<br>blocked: −∞ before softmax<extra></extra>",
                showlegend=True,
            )
        )
    fig.update_yaxes(autorange="reversed", type="category", showgrid=False, zeroline=False)
    fig.update_xaxes(type="category", tickangle=-45, showgrid=False, zeroline=False)
    fig.update_layout(
        title=title + (f" — block-averaged {block[0]}×{block[1]}" if block != (1, 1) else ""),
        plot_bgcolor=BLOCKED_COLOR if blocked.any() else "white",
        xaxis_title=x_title,
        yaxis_title=y_title,
        height=min(720, max(300, 28 * len(rows) + 140)),
        margin={"l": 40, "r": 20, "t": 60, "b": 40},
        legend={"orientation": "h", "y": 1.02, "x": 1, "xanchor": "right", "yanchor": "bottom"},
        meta={"downsampled": list(block), "blocked": int(blocked.sum())},
    )
    return fig
