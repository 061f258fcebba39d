"""Attention maps as heatmaps: every head of a layer (`head_grid`), one matrix (`matrix`),
and a 0/1 mask as some API encodes it (`binary_mask`).

Readability rules every heatmap follows:
- every row and column is labelled up to `LABEL_LIMIT` positions (explicit
  `tickvals`/`ticktext`); above, every k-th one, and `meta["label_stride"]` says k;
- the height grows with the number of rows (`cells.cell_px` pixels per row);
- blocked cells (masked out) look the same everywhere: `attnviz.plots.blocked`;
- the colour scale of attention weights is not set by a trivially certain row: `cells.weight_scale`;
- the title, the colour bar and the legend are stacked at the top left (`Header`), one
  under the other: none covers another, and none sits under the chart toolbar at the top right;
- a horizontal colour bar is named by an annotation beside it, not by its own title
  (`attnviz.plots.colorbar` says why).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from attnviz.plots import blocked as blocked_cells
from attnviz.plots.cells import MAX_CELLS_PER_FIGURE, cell_px, cell_range, fit, font_px, weight_scale
from attnviz.plots.colorbar import BAR_PAD_PX, BAR_PX, BAR_THICK_PX, NAME_GAP_PX, bar_name, bar_px_beside
from attnviz.plots.labels import (
    LABEL_LIMIT,
    TOOLBAR_PX,
    axis_ticks,
    label_stride,
    positions,
    safe_labels,
    text_px,
    x_angle,
    x_band_px,
)

CLICKABLE_CELLS = 4_096  # up to this many cells, head_grid's panels can report a click
VALUES_LIMIT = 16  # cell values can be written into heatmaps up to 16 × 16 …
VALUES_ACROSS = 32  # … and up to this many cells across a row of panels: narrower cells cannot
# hold "0.12" in a font a projector shows (4 panels × 8 keys at most; 2 × 16)
VALUE_FONT_PX = 13
PANEL_TITLE_PX = 30  # room for a panel's title above it
Y_TITLE_PX = 26  # a vertical axis title and its gap to the labels
# -- the band above the panels --------------------------------------------------------------


@dataclass(frozen=True)
class Header:
    """Title, colour bar and legend stacked top-down at the top left of a figure, in pixels,
    under the band the chart's mode bar takes (`TOOLBAR_PX`)."""

    title: str = ""
    colorbar: bool = False
    legend: bool = False
    bar_px: int = BAR_PX  # the colour bar's length, its padding included

    ROWS = (("title", 34), ("colorbar", 56), ("legend", 28))  # each item's band height

    def top(self, item: str) -> int:
        """Pixels from the figure's top edge to the top of `item`'s band."""
        y = TOOLBAR_PX
        for name, px in self.ROWS:
            if name == item:
                return y
            y += px if getattr(self, name) else 0
        return y

    @property
    def height(self) -> int:
        """Pixels above the panels' titles."""
        return self.top("end")

    def apply(self, fig: go.Figure, height: int) -> None:
        """Place the title and the legend (the colour bar is placed by `colorbar`)."""
        y = lambda item: 1 - self.top(item) / height  # noqa: E731 — container fraction, top-down
        if self.title:
            fig.update_layout(
                title={"text": self.title, "x": 0, "xref": "paper", "xanchor": "left", "y": y("title"),
                       "yref": "container", "yanchor": "top", "font": {"size": 16}}
            )  # fmt: skip
        fig.update_layout(
            legend={"orientation": "h", "x": 0, "xanchor": "left", "y": y("legend"), "yanchor": "top",
                    "yref": "container", "font": {"size": 13}}
        )  # fmt: skip

    def colorbar_spec(self, height: int) -> dict:
        """A horizontal colour bar at the top left: the panels keep the whole width (a phone).
        It has no title: `colorbar_name` writes its name beside it."""
        return {
            "orientation": "h",
            "x": 0,
            "xanchor": "left",
            "len": self.bar_px,
            "lenmode": "pixels",
            "thickness": BAR_THICK_PX,
            "nticks": 5,
            "tickfont": {"size": 12},
            "yref": "container",
            "y": 1 - self.top("colorbar") / height,
            "yanchor": "top",
        }

    def colorbar_name(self, text: str, margin_top: int) -> dict:
        """The colour bar's name right of it (clear of its box), on its middle line (the plot area's
        top edge lies `margin_top` pixels below the figure's)."""
        middle = self.top("colorbar") + BAR_PAD_PX + BAR_THICK_PX / 2
        return bar_name(text, x=0, xanchor="left", xshift=self.bar_px + NAME_GAP_PX,
                        y=1, yanchor="middle", yshift=margin_top - middle)  # fmt: skip


def _full_title(title: str, block: tuple[int, int]) -> str:
    """The title, saying when cells are block means ("Block-averaged 3×3" alone when untitled)."""
    if block == (1, 1):
        return title
    return (
        f"{title} — block-averaged {block[0]}×{block[1]}"
        if title
        else f"Block-averaged {block[0]}×{block[1]}"
    )


def _cell_axes(
    fig: go.Figure, rows: list[str], cols: list[str], font: int, x_limit: int = LABEL_LIMIT
) -> None:
    """Category axes spanning exactly the cells, rows top-down. Every row is labelled up to
    `LABEL_LIMIT` (a row's height is fixed, `cells.cell_px`). Columns: below `LABEL_LIMIT`
    (`x_limit`, a feature axis) every k-th up to `x_limit`; tokens, every one the drawn width
    holds — plotly's own choice on a category axis, one label per 1.2 font heights — so a
    panel on a phone labels every other key where it would have run them into each other (12 px
    apart at 390 px with 11 keys, 5 px with 512) and a desktop's labels every one up to 64 and more."""
    fig.update_yaxes(type="category", showgrid=False, zeroline=False, automargin=True,
                     **cell_range(len(rows), True), **axis_ticks(rows, font))  # fmt: skip
    ticks = (
        axis_ticks(cols, font, x_limit)
        if x_limit < LABEL_LIMIT
        else {"tickmode": "auto", "tickfont": {"size": font}}
    )
    shown = cols[:: label_stride(len(cols), x_limit)]
    fig.update_xaxes(type="category", showgrid=False, zeroline=False, tickangle=x_angle(shown),
                     **cell_range(len(cols)), **ticks)  # fmt: skip


# -- head_grid ------------------------------------------------------------------------------


def default_columns(n_panels: int, n_tokens: int) -> int:
    """Panels per row: two up to 24 tokens (fits a phone as well as a desktop), then one."""
    return max(1, min(n_panels, 2 if n_tokens <= 24 else 1))


@dataclass(frozen=True)
class _Grid:
    """Pixel sizes of head_grid's panels: `panels` maps of `lq` × `lk` cells, `cols` a row."""

    panels: int
    cols: int
    lq: int
    lk: int
    cell: int  # pixels per row of cells
    font: int  # tick labels
    band: int  # pixels the key labels take under a panel

    @classmethod
    def of(cls, shape: tuple[int, int, int], k_names: list[str], cols: int | None) -> _Grid:
        H, lq, lk = shape
        cols = max(1, min(H, cols or default_columns(H, max(lq, lk))))
        cell = cell_px(lq)
        return cls(H, cols, lq, lk, cell, font_px(cell), x_band_px(k_names, font_px(cell)))

    @property
    def rows(self) -> int:
        return math.ceil(self.panels / self.cols)

    @property
    def gap(self) -> int:
        """Between rows of panels: the key labels of the row above and the next panel's title."""
        return self.band + PANEL_TITLE_PX + 4

    @property
    def plot_px(self) -> int:
        return self.rows * self.cell * self.lq + (self.rows - 1) * self.gap

    @property
    def values_fit(self) -> bool:
        return self.lq <= VALUES_LIMIT and self.lk <= VALUES_LIMIT and self.cols * self.lk <= VALUES_ACROSS

    def place(self, h: int) -> dict:
        return {"row": h // self.cols + 1, "col": h % self.cols + 1}

    def subplots(self, titles: list[str]) -> go.Figure:
        return make_subplots(
            rows=self.rows,
            cols=self.cols,
            shared_yaxes=True,
            subplot_titles=titles,
            horizontal_spacing=0.04 if self.cols > 1 else 0.0,
            vertical_spacing=self.gap / self.plot_px if self.rows > 1 else 0.0,
        )


def _panel(z: np.ndarray, q_names, k_names, name: str, value_name: str, written: bool) -> go.Heatmap:
    return go.Heatmap(
        z=z,
        x=k_names,
        y=q_names,
        coloraxis="coloraxis",
        name=name,
        texttemplate="%{z:.2f}" if written else None,
        textfont={"size": VALUE_FONT_PX},
        hovertemplate=f"{name}<br>query %{{y}}<br>key %{{x}}<br>{value_name} %{{z:.4g}}<extra></extra>",
    )


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
    panel_titles: list[str] | None = None,
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
        show_values: write each value in its cell, when the cells can hold it legibly
            (`VALUES_LIMIT` × `VALUES_LIMIT` at most, `VALUES_ACROSS` cells across a row of panels);
            `meta["values_written"]` says whether they were.
        clickable: up to `CLICKABLE_CELLS` cells, add one invisible marker per cell (traces
            H … 2H−1, head h's is trace H + h) that a chart selection can report: plotly
            heatmaps cannot be selected. They carry the hover text; `meta["clickable"]` says
            whether they were added.
        panel_titles: one title per head (default "head h"), e.g. the pattern a head shows.
        max_cells: above this many cells in total, blocks are averaged and
            `fig.layout.meta["downsampled"]` says by how much.

    Returns:
        A figure with one heatmap trace per head (trace `name` "head h"), sized from
        the token count; `meta` holds `downsampled`, `panels`, `columns`,
        `label_stride`, `color_scale` (a sentence for a caption), `clickable` and `values_written`.
    """
    H = weights.shape[0]
    values, q_names, k_names, block = fit(np.asarray(weights, np.float64), q_labels, k_labels, max_cells)
    mask = blocked_cells.broadcast(blocked, values.shape, block)
    grid = _Grid.of(values.shape, k_names, cols)
    fig = grid.subplots(safe_labels(panel_titles) if panel_titles else [f"head {h}" for h in range(H)])
    written = show_values and grid.values_fit
    for h in range(H):
        fig.add_trace(_panel(values[h], q_names, k_names, f"head {h}", value_name, written), **grid.place(h))
    clickable = clickable and values.size <= CLICKABLE_CELLS
    if clickable:
        for h in range(H):
            panel_mask = None if mask is None else mask[h]
            targets = _click_targets(
                values[h], panel_mask, q_names, k_names, f"head {h}", value_name, grid.cell
            )
            fig.add_trace(targets, **grid.place(h))
        fig.update_traces(hoverinfo="skip", hovertemplate=None, selector={"type": "heatmap"})
    if mask is not None:
        blocked_cells.draw(fig, mask, grid.cell)
    _cell_axes(fig, q_names, k_names, grid.font)
    fig.update_annotations(font_size=14)  # the panel titles
    top, how = (zmax, "") if zmax is not None else weight_scale(values, mask, value_name)
    header = Header(_full_title(title, block), colorbar=True, legend=mask is not None)
    height = header.height + PANEL_TITLE_PX + grid.plot_px + grid.band + 20
    header.apply(fig, height)
    fig.add_annotation(header.colorbar_name(value_name, header.height + PANEL_TITLE_PX))
    fig.update_layout(
        coloraxis={"colorscale": colorscale, "cmin": zmin, "cmax": top, "colorbar": header.colorbar_spec(height)},
        height=height,
        margin={"l": 10, "r": 10, "t": header.height + PANEL_TITLE_PX, "b": grid.band + 20},
        hoverdistance=-1 if clickable else 20,
        meta={"downsampled": list(block), "panels": H, "columns": grid.cols, "clickable": clickable,
              "label_stride": label_stride(max(grid.lq, grid.lk)), "color_scale": how, "values_written": written},
    )  # fmt: skip
    return fig


# -- matrix ---------------------------------------------------------------------------------


def _matrix_scale(shown: np.ndarray, mask, diverging: bool, zmax: float | None, value_name: str):
    """The heatmap's z range and a sentence saying how it was chosen."""
    finite = shown[np.isfinite(shown)]
    if diverging:
        bound = float(np.abs(finite).max()) if finite.size else 1.0
        return {"zmid": 0.0, "zmin": -bound, "zmax": bound}, f"Colour scale ±{bound:.3g}, centred on 0."
    low = float(finite.min()) if finite.size else 0.0
    top, how = (
        (zmax, "") if zmax is not None else weight_scale(np.nan_to_num(shown, nan=0.0), mask, value_name)
    )
    return {"zmin": min(0.0, low), "zmax": top}, how


def _hover_text(shown: np.ndarray, mask, value_name: str, blocked_name: str) -> list[list[str]]:
    """Each cell's hover line: its value, or what blocked it (blocked cells hold no value)."""
    text = np.vectorize(lambda v: f"{value_name} {v:.4f}", otypes=[object])(shown)
    if mask is not None:
        text[mask] = "blocked: weight exactly 0" if blocked_name == "blocked (masked out)" else blocked_name
    return text.tolist()


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
        A figure whose first trace is the heatmap (blocked cells are None in `z`; their
        hover text says why); when cells are blocked, a second trace is their legend entry.
        `meta` holds `downsampled`, `blocked`, `label_stride` and `color_scale`.
    """
    values = np.asarray(values, np.float64)
    blocked = np.isneginf(values) | (False if blocked is None else np.asarray(blocked, bool))
    shown, rows, cols, block = fit(np.where(blocked, np.nan, values), row_labels, col_labels, max_cells)
    R, C = shown.shape
    mask = blocked_cells.broadcast(blocked, shown.shape, block)
    blocked_name = "blocked (−∞)" if np.isneginf(values).any() else "blocked (masked out)"
    zrange, how = _matrix_scale(shown, mask, diverging, zmax, value_name)
    cell = cell_px(R)
    font = font_px(cell)
    # the bar starts right of the row labels and the axis title: shortened there to leave its name room
    left = 10 + text_px(rows[:: label_stride(R)], font) + (Y_TITLE_PX if y_title else 0)
    header = Header(
        _full_title(title, block),
        colorbar=True,
        legend=mask is not None,
        bar_px=bar_px_beside(left, value_name),
    )
    band = x_band_px(cols[:: label_stride(C, x_label_limit)], font) + (20 if x_title else 0)
    height = header.height + 10 + R * cell + band + 20
    fig = go.Figure(
        go.Heatmap(
            z=np.where(np.isfinite(shown), shown, None) if mask is not None else shown,
            x=cols,
            y=rows,
            text=_hover_text(shown, mask, value_name, blocked_name),
            colorscale=colorscale,
            reversescale=diverging,
            texttemplate="%{z:.2f}" if show_values and R <= VALUES_LIMIT and C <= VALUES_LIMIT else None,
            textfont={"size": VALUE_FONT_PX},
            colorbar=header.colorbar_spec(height),
            hovertemplate="row %{y}<br>column %{x}<br>%{text}<extra></extra>",
            **zrange,
        )
    )
    if mask is not None:
        blocked_cells.draw(fig, mask[None], cell, name=blocked_name)
    _cell_axes(fig, rows, cols, font, x_label_limit)
    header.apply(fig, height)
    fig.add_annotation(header.colorbar_name(value_name, header.height + 10))
    fig.update_layout(
        plot_bgcolor="white",
        xaxis_title=x_title,
        yaxis_title=y_title,
        height=height,
        margin={"l": 10, "r": 10, "t": header.height + 10, "b": band + 20},
        meta={"downsampled": list(block), "blocked": int(blocked.sum()), "label_stride": label_stride(max(R, C)),
              "color_scale": how},
    )  # fmt: skip
    return fig


# -- binary_mask ----------------------------------------------------------------------------


def weights(
    values: np.ndarray,
    row_labels,
    col_labels,
    *,
    blocked: np.ndarray | None,
    title: str,
    y_title: str = "query token",
    x_title: str = "key token",
) -> go.Figure:
    """Attention weights `(R, C)` as the pages draw them: `matrix` in blues from 0, "weight" on hover."""
    return matrix(
        values, row_labels, col_labels, blocked=blocked, diverging=False, colorscale="Blues", title=title,
        value_name="weight", y_title=y_title, x_title=x_title,
    )  # fmt: skip


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
        height: at least this tall (to line several masks up side by side).
    """
    encoded = np.asarray(encoded)
    R, C = encoded.shape
    rows = safe_labels(positions(R) if row_labels is None else row_labels)
    cols = safe_labels(positions(C) if col_labels is None else col_labels)
    one, zero = ("True", "False") if encoded.dtype == bool else ("1", "0")
    dark, light = "#1f4e79", "#dbe7f3"
    fig = go.Figure(
        go.Heatmap(
            z=encoded.astype(int), x=cols, y=rows, zmin=0, zmax=1, showscale=False, xgap=1, ygap=1,
            colorscale=[[0, light], [0.5, light], [0.5, dark], [1, dark]],
            hovertemplate="query %{y}<br>key %{x}<br>value %{z}<extra></extra>",
        )
    )  # fmt: skip
    for value, colour in ((one, dark), (zero, light)):
        means = "may attend" if (value in ("True", "1")) == bool(attend) else "blocked"
        fig.add_trace(
            go.Scatter(
                x=[None], y=[None], mode="markers", name=f"{value} = {means}",
                marker={"symbol": "square", "size": 14, "color": colour, "line": {"color": "#777", "width": 1}},
            )
        )  # fmt: skip
    font = font_px(cell_px(R))
    band = x_band_px(cols, font)
    _cell_axes(fig, rows, cols, font)
    header = Header(title, legend=True)
    height = max(height or 0, header.height + 10 + R * cell_px(R) + band + 10)
    header.apply(fig, height)
    fig.update_layout(
        plot_bgcolor="white",
        height=height,
        margin={"l": 10, "r": 10, "t": header.height + 10, "b": band + 10},
        meta={"label_stride": label_stride(max(R, C))},
    )
    return fig
