"""Attention maps as heatmaps: every head of a layer (`head_grid`), one matrix (`matrix`),
and a 0/1 mask as some API encodes it (`binary_mask`).

Readability rules every heatmap follows:
- every row and column is labelled up to `LABEL_LIMIT` positions (explicit
  `tickvals`/`ticktext`); above, every k-th one, and `meta["label_stride"]` says k;
- the height grows with the number of rows (`cells.cell_px` pixels per row);
- blocked cells (masked out) look the same everywhere: `attnviz.plots.blocked`;
- the colour scale of attention weights is not set by a trivially certain row: `cells.weight_scale`.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from attnviz.plots import blocked as blocked_cells
from attnviz.plots.blocked import BLOCKED_COLOR, CROSS_COLOR
from attnviz.plots.cells import MAX_CELLS_PER_FIGURE, cell_px, cell_range, fit, font_px, weight_scale
from attnviz.plots.labels import (
    LABEL_LIMIT,
    axis_ticks,
    label_stride,
    positions,
    safe_labels,
    x_angle,
    x_band_px,
)

CLICKABLE_CELLS = 4_096  # up to this many cells, head_grid's panels can report a click
VALUES_LIMIT = 16  # cell values can be written into heatmaps up to 16 × 16


def default_columns(n_panels: int, n_tokens: int) -> int:
    """Panels per row: two up to 24 tokens (fits a phone as well as a desktop), then one."""
    return max(1, min(n_panels, 2 if n_tokens <= 24 else 1))


def _click_targets(values, blocked, q_names, k_names, name: str, value_name: str, cell: int) -> go.Scatter:
    """Invisible markers at every cell centre of one panel: they carry the hover text and
    let a click select the panel (heatmap cells are not selectable in plotly)."""
    R, C = values.shape
    shown = [f"{value_name} {v:.4g}" for v in values.reshape(-1)]
    if blocked is not None:
        shown = [
            f"blocked: {value_name} 0" if b else t for t, b in zip(shown, blocked.reshape(-1), strict=True)
        ]
    return go.Scatter(
        x=list(k_names) * R,
        y=[q for q in q_names for _ in range(C)],
        customdata=values.reshape(-1),
        text=shown,
        mode="markers",
        marker={"size": cell, "symbol": "square", "opacity": 0, "color": "black"},
        selected={"marker": {"opacity": 0}},
        unselected={"marker": {"opacity": 0}},
        name=name,
        showlegend=False,
        hovertemplate=f"{name}<br>query %{{y}}<br>key %{{x}}<br>%{{text}}<extra></extra>",
    )


def _top_colorbar(title: str, top_px: int, height: int) -> dict:
    """A horizontal colour bar above the panels, left: the panels keep the whole width (a phone)."""
    return {
        "title": {"text": title, "side": "right"},
        "orientation": "h",
        "x": 0,
        "xanchor": "left",
        "len": 200,
        "lenmode": "pixels",  # fits beside its title on a phone
        "thickness": 10,
        "nticks": 5,
        "yref": "container",
        "y": 1 - top_px / height,
        "yanchor": "top",
    }


# -- heatmaps -----------------------------------------------------------------------------


def head_grid(
    weights: np.ndarray,
    q_labels=None,
    k_labels=None,
    *,
    blocked: np.ndarray | None = None,
    title: str = "",
    colorscale: str = "Blues",
    zmin: float = 0.0,
    zmax: float | None = None,
    value_name: str = "weight",
    cols: int | None = None,
    show_values: bool = False,
    clickable: bool = False,
    max_cells: int = MAX_CELLS_PER_FIGURE,
) -> go.Figure:
    """All heads' `(Lq, Lk)` maps as panels of one figure with one colour scale.

    Args:
        weights: `(H, Lq, Lk)`.
        q_labels, k_labels: names of queries (rows) and keys (columns); positions by default.
        blocked: bool `(Lq, Lk)` or `(H, Lq, Lk)`, True = masked out: drawn grey with ✕.
        zmax: top of the colour scale; None → `weight_scale`.
        cols: panels per row (default `default_columns`). Panels in a row share the
            query axis, labelled on the left only, so no label reaches a neighbour.
        show_values: write each value in its cell (up to `VALUES_LIMIT` × `VALUES_LIMIT`).
        clickable: up to `CLICKABLE_CELLS` cells, add one invisible marker per cell (traces
            H … 2H−1, head h's is trace H + h) that a chart selection can report: plotly
            heatmaps cannot be selected. They carry the hover text; `meta["clickable"]` says
            whether they were added.
        max_cells: above this many cells in total, blocks are averaged and
            `fig.layout.meta["downsampled"]` says by how much.

    Returns:
        A figure with one heatmap trace per head (trace `name` "head h"), sized from
        the token count; `meta` holds `downsampled`, `panels`, `columns`,
        `label_stride` and `color_scale` (a sentence for a caption).
    """
    H = weights.shape[0]
    values, q_names, k_names, block = fit(np.asarray(weights, np.float64), q_labels, k_labels, max_cells)
    lq, lk = values.shape[1:]
    mask = blocked_cells.broadcast(blocked, values.shape, block)
    cols = max(1, min(H, cols or default_columns(H, max(lq, lk))))
    rows = math.ceil(H / cols)
    cell = cell_px(lq)
    font = font_px(cell)
    band = x_band_px(k_names, font)
    gap = band + 34  # key labels of the row above + the next panel's title
    plot_h = rows * cell * lq + (rows - 1) * gap
    fig = make_subplots(
        rows=rows,
        cols=cols,
        shared_yaxes=True,
        subplot_titles=[f"head {h}" for h in range(H)],
        horizontal_spacing=0.04 if cols > 1 else 0.0,
        vertical_spacing=gap / plot_h if rows > 1 else 0.0,
    )
    top, how = (zmax, "") if zmax is not None else weight_scale(values, mask, value_name)
    text = show_values and lq <= VALUES_LIMIT and lk <= VALUES_LIMIT
    for h in range(H):
        fig.add_trace(
            go.Heatmap(
                z=values[h],
                x=k_names,
                y=q_names,
                coloraxis="coloraxis",
                name=f"head {h}",
                texttemplate="%{z:.2f}" if text else None,
                hovertemplate=f"head {h}<br>query %{{y}}<br>key %{{x}}<br>{value_name} %{{z:.4g}}"
                "<extra></extra>",
            ),
            row=h // cols + 1,
            col=h % cols + 1,
        )
        if mask is not None:
            suffix = "" if h == 0 else str(h + 1)
            for shape in blocked_cells.shapes(
                mask[h], f"x{suffix}", f"y{suffix}", crosses=cell >= 14 and lk <= 48
            ):
                fig.add_shape(shape)
    clickable = clickable and values.size <= CLICKABLE_CELLS
    if clickable:
        for h in range(H):
            cells = _click_targets(
                values[h], None if mask is None else mask[h], q_names, k_names, f"head {h}", value_name, cell
            )
            fig.add_trace(cells, row=h // cols + 1, col=h % cols + 1)
        fig.update_traces(hoverinfo="skip", hovertemplate=None, selector={"type": "heatmap"})
    if mask is not None:
        fig.add_trace(blocked_cells.legend(), row=1, col=1)
    fig.update_yaxes(type="category", showgrid=False, **cell_range(lq, True), **axis_ticks(q_names, font))
    fig.update_xaxes(
        **cell_range(lk),
        type="category",
        showgrid=False,
        tickangle=x_angle(k_names),
        **axis_ticks(k_names, font),
    )
    fig.update_annotations(font_size=13)  # the panel titles
    stride = label_stride(max(lq, lk))
    header = 44 if title else 8  # the figure title; then the colour bar, the legend under it
    top_px = header + 70 + (24 if mask is not None else 0)
    height = top_px + plot_h + band + 20
    fig.update_layout(
        title=(title + (f" — block-averaged {block[0]}×{block[1]}" if block != (1, 1) else "")) or None,
        coloraxis={
            "colorscale": colorscale,
            "cmin": zmin,
            "cmax": top,
            "colorbar": _top_colorbar(value_name, header - 4, height),
        },
        height=height,
        margin={"l": 10, "r": 10, "t": top_px, "b": band + 20},
        legend={
            "orientation": "h",
            "x": 0,
            "xanchor": "left",
            "y": 1 - (header + 40) / height,
            "yanchor": "top",
            "yref": "container",
        },
        hoverdistance=-1 if clickable else 20,
        meta={
            "downsampled": list(block),
            "panels": H,
            "columns": cols,
            "label_stride": stride,
            "color_scale": how,
            "clickable": clickable,
        },
    )
    fig.update_yaxes(automargin=True)
    return fig


def matrix(
    values: np.ndarray,
    row_labels=None,
    col_labels=None,
    *,
    blocked: np.ndarray | None = None,
    title: str = "",
    colorscale: str = "RdBu",
    diverging: bool = True,
    value_name: str = "value",
    zmax: float | None = None,
    x_title: str | None = None,
    y_title: str | None = None,
    show_values: bool = False,
    x_label_limit: int = LABEL_LIMIT,
    max_cells: int = MAX_CELLS_PER_FIGURE,
) -> go.Figure:
    """One `(R, C)` matrix as a heatmap, blocked cells grey and marked ✕.

    Args:
        values: `(R, C)`; -inf cells (masked scores) count as blocked.
        blocked: bool `(R, C)`, True = masked out (for weights, whose blocked cells hold 0).
        zmax: top of the colour scale when not diverging; None → `weight_scale`.
        show_values: write each value in its cell (up to `VALUES_LIMIT` × `VALUES_LIMIT`).
        x_label_limit: label at most this many columns (every k-th above): for a feature
            axis in a narrow chart; tokens keep the default, every one up to 64.

    Returns:
        A figure whose first trace is the heatmap (blocked cells are None in `z`); when
        cells are blocked, a second trace (hover and legend) lists them. `meta` holds
        `downsampled`, `blocked`, `label_stride` and `color_scale`.
    """
    values = np.asarray(values, np.float64)
    blocked = np.isneginf(values) | (False if blocked is None else np.asarray(blocked, bool))
    shown, rows, cols, block = fit(np.where(blocked, np.nan, values), row_labels, col_labels, max_cells)
    R, C = shown.shape
    mask = blocked_cells.broadcast(blocked, shown.shape, block)
    finite = shown[np.isfinite(shown)]
    if diverging:
        bound = float(np.abs(finite).max()) if finite.size else 1.0
        zrange, how = (
            {"zmid": 0.0, "zmin": -bound, "zmax": bound},
            f"Colour scale ±{bound:.3g}, centred on 0.",
        )
    else:
        low = float(finite.min()) if finite.size else 0.0
        top, how = (
            (zmax, "") if zmax is not None else weight_scale(np.nan_to_num(shown, nan=0.0), mask, value_name)
        )
        zrange = {"zmin": min(0.0, low), "zmax": top}
    cell = cell_px(R)
    font = font_px(cell)
    x_shown = cols[:: label_stride(C, x_label_limit)]
    band = x_band_px(x_shown, font) + (20 if x_title else 0)
    text = show_values and R <= VALUES_LIMIT and C <= VALUES_LIMIT
    fig = go.Figure(
        go.Heatmap(
            z=np.where(np.isfinite(shown), shown, None) if mask is not None else shown,
            x=cols,
            y=rows,
            colorscale=colorscale,
            reversescale=diverging,
            hoverongaps=False,
            texttemplate="%{z:.2f}" if text else None,
            colorbar={"title": {"text": value_name}, "thickness": 12},
            hovertemplate=f"row %{{y}}<br>column %{{x}}<br>{value_name} %{{z:.4f}}<extra></extra>",
            **zrange,
        )
    )
    if mask is not None:
        r, c = np.nonzero(mask)
        fig.add_trace(
            go.Scatter(
                x=[cols[j] for j in c],
                y=[rows[i] for i in r],
                mode="markers",
                marker={
                    "symbol": "square-x",
                    "size": 14,
                    "color": BLOCKED_COLOR,
                    "line": {"color": CROSS_COLOR, "width": 1},
                },
                name="blocked (−∞)" if np.isneginf(values).any() else "blocked (masked out)",
                showlegend=True,
                hovertemplate="row %{y}<br>column %{x}<br>blocked: weight exactly 0<extra></extra>",
            )
        )  # fmt: skip; the markers sit under the grey shapes: they serve the hover and the legend
        for shape in blocked_cells.shapes(mask, "x", "y", crosses=cell >= 14 and len(r) <= 4000):
            fig.add_shape(shape)
    fig.update_yaxes(**cell_range(R, True), type="category", showgrid=False, zeroline=False, automargin=True,
                     **axis_ticks(rows, font))  # fmt: skip
    fig.update_xaxes(
        **cell_range(C),
        type="category",
        showgrid=False,
        zeroline=False,
        tickangle=x_angle(x_shown),
        **axis_ticks(cols, font, x_label_limit),
    )
    top_px = (60 if title else 30) + (25 if mask is not None else 0)
    fig.update_layout(
        title=(title + (f" — block-averaged {block[0]}×{block[1]}" if block != (1, 1) else "")) or None,
        plot_bgcolor="white",
        xaxis_title=x_title,
        yaxis_title=y_title,
        height=top_px + R * cell + band + 20,
        margin={"l": 10, "r": 10, "t": top_px, "b": band + 20},
        legend={"orientation": "h", "y": 1.0, "x": 1, "xanchor": "right", "yanchor": "top", "yref": "container"},
        meta={"downsampled": list(block), "blocked": int(blocked.sum()), "label_stride": label_stride(max(R, C)),
              "color_scale": how},
    )  # fmt: skip
    return fig


def binary_mask(
    encoded: np.ndarray,
    row_labels=None,
    col_labels=None,
    *,
    title: str = "",
    attend,
    height: int | None = None,
) -> go.Figure:
    """A 0/1 (or bool) mask in two colours with a two-entry legend, not a colour bar.

    Args:
        encoded: `(R, C)` as some API expects it.
        attend: the value that means "may attend" in that API (True, False, 1 or 0).
    """
    encoded = np.asarray(encoded)
    R, C = encoded.shape
    rows, cols = (
        safe_labels(positions(R) if row_labels is None else row_labels),
        safe_labels(positions(C) if col_labels is None else col_labels),
    )
    one, zero = ("True", "False") if encoded.dtype == bool else ("1", "0")
    dark, light = "#1f4e79", "#dbe7f3"
    fig = go.Figure(
        go.Heatmap(
            z=encoded.astype(int),
            x=cols,
            y=rows,
            zmin=0,
            zmax=1,
            colorscale=[[0, light], [0.5, light], [0.5, dark], [1, dark]],
            showscale=False,
            xgap=1,
            ygap=1,
            hovertemplate="query %{y}<br>key %{x}<br>value %{z}<extra></extra>",
        )
    )
    for value, colour in ((one, dark), (zero, light)):
        means = "may attend" if (value in ("True", "1")) == bool(attend) else "blocked"
        fig.add_trace(
            go.Scatter(
                x=[None], y=[None], mode="markers", name=f"{value} = {means}",
                marker={"symbol": "square", "size": 14, "color": colour, "line": {"color": "#777", "width": 1}},
            )
        )  # fmt: skip
    cell = cell_px(R)
    font = font_px(cell)
    band = x_band_px(cols, font)
    fig.update_yaxes(
        autorange="reversed", type="category", showgrid=False, automargin=True, **axis_ticks(rows, font)
    )
    fig.update_xaxes(type="category", showgrid=False, tickangle=x_angle(cols), **axis_ticks(cols, font))
    height = height or 90 + R * cell + band
    fig.update_layout(
        title={"text": title, "font": {"size": 14}, "y": 1 - 8 / height, "yanchor": "top"} if title else None,
        plot_bgcolor="white",
        height=height,
        margin={"l": 10, "r": 10, "t": 70, "b": band + 10},
        legend={"orientation": "h", "y": 1 - 34 / height, "x": 0, "xanchor": "left", "yanchor": "top", "yref": "container",
                "font": {"size": 12}},
        meta={"label_stride": label_stride(max(R, C))},
    )  # fmt: skip
    return fig
