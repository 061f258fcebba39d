"""Figure builders: NumPy in, `plotly.graph_objects.Figure` out. No Streamlit, no framework.

Every label that may come from a user (tokens, titles) goes through
`safe_labels`, because plotly renders a subset of HTML in tick labels and
hover text.

Readability rules every heatmap follows:
- every row and column is labelled up to `LABEL_LIMIT` positions (explicit
  `tickvals`/`ticktext`); above, every k-th one, and `meta["label_stride"]` says k;
- the height grows with the number of rows (`cell_px` pixels per row);
- blocked cells (masked out) look the same everywhere: grey, marked ✕;
- the colour scale of attention weights is not set by a trivially certain row
  (a row with one allowed key holds a single weight 1): see `weight_scale`.
"""

from __future__ import annotations

import html
import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from attnviz.analysis import block_labels, block_mean

MAX_CELLS_PER_FIGURE = 65_536  # above this, heatmaps are block-averaged
CLICKABLE_CELLS = 4_096  # up to this many cells, head_grid's panels can report a click
LABEL_LIMIT = 64  # every position labelled up to this many; above, every k-th
VALUES_LIMIT = 16  # cell values can be written into heatmaps up to 16 × 16
BLOCKED_COLOR = "#9e9e9e"
CROSS_COLOR = "#424242"
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


def duration(seconds: float) -> str:
    """A time in the unit that keeps it short (three significant digits): '91.2 µs', '1.89 ms', '149 ms'."""
    for unit, scale in (("µs", 1e-6), ("ms", 1e-3)):
        if float(f"{seconds / scale:.3g}") < 1000:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds:.3g} s"


def positions(n: int) -> list[str]:
    return [str(i) for i in range(n)]


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


# -- sizes and labels -------------------------------------------------------------------------


def label_stride(n: int, limit: int = LABEL_LIMIT) -> int:
    """1 (every label) up to `limit` positions, else the k that keeps ≤ `limit` labels."""
    return max(1, math.ceil(n / limit))


def cell_px(n: int) -> int:
    """Pixels per heatmap row for `n` rows: room for a readable label on every row up to 64."""
    if n <= LABEL_LIMIT:
        return int(max(14, min(24, 400 / max(n, 1))))
    return max(2, int(900 / n))


def _font_px(cell: int) -> int:
    return 12 if cell >= 20 else 11 if cell >= 16 else 10


def _text_px(labels: list[str], font: int) -> int:
    """Rough width of the longest label (plotly's default font: ~0.6 em per character)."""
    longest = max((len(s.replace(_ZW, "")) for s in labels), default=1)
    return int(longest * font * 0.62) + 6


def _axis_ticks(names: list[str], font: int, limit: int = LABEL_LIMIT) -> dict:
    """Explicit ticks: every name up to `limit`, else every k-th."""
    shown = names[:: label_stride(len(names), limit)]
    return {"tickmode": "array", "tickvals": shown, "ticktext": shown, "tickfont": {"size": font}}


def _cell_range(n: int, reversed_: bool = False) -> dict:
    """An axis spanning exactly `n` cells (markers or shapes must not pad it); rows top-down."""
    return {"range": [n - 0.5, -0.5] if reversed_ else [-0.5, n - 0.5], "autorange": False}


def _x_angle(names: list[str]) -> int:
    """Upright labels for a few short names; vertical otherwise, so a label never reaches its neighbour."""
    short = max((len(s.replace(_ZW, "")) for s in names), default=1) <= 2
    return 0 if short and len(names) <= 16 else -90


def _x_band_px(names: list[str], font: int) -> int:
    """Height the key labels take under a panel."""
    return font + 10 if _x_angle(names) == 0 else _text_px(names, font) + 6


def default_columns(n_panels: int, n_tokens: int) -> int:
    """Panels per row: two up to 24 tokens (fits a phone as well as a desktop), then one."""
    return max(1, min(n_panels, 2 if n_tokens <= 24 else 1))


# -- blocked cells -------------------------------------------------------------------------


def _rectangles(blocked: np.ndarray) -> list[tuple[int, int, int, int]]:
    """Blocked cells of `(R, C)` as rectangles `(row0, row1, col0, col1)` (end-exclusive):
    runs along each row, merged down while the next row has the same run."""
    open_runs: dict[tuple[int, int], int] = {}
    done = []
    for i, row in enumerate(np.asarray(blocked, bool)):
        edges = np.flatnonzero(np.diff(np.r_[0, row.astype(np.int8), 0]))
        runs = set(zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True))
        for run in list(open_runs):
            if run not in runs:
                done.append((open_runs.pop(run), i, *run))
        for run in runs:
            open_runs.setdefault(run, i)
    done.extend((start, len(blocked), *run) for run, start in open_runs.items())
    return done


def _blocked_shapes(blocked: np.ndarray, xref: str, yref: str, crosses: bool) -> list[dict]:
    """Grey rectangles over the blocked cells of one panel, and a ✕ in each (SVG paths in
    category-index coordinates), drawn above the heatmap."""
    fill = "".join(
        f"M{c0 - 0.5},{r0 - 0.5}H{c1 - 0.5}V{r1 - 0.5}H{c0 - 0.5}Z" for r0, r1, c0, c1 in _rectangles(blocked)
    )
    if not fill:
        return []
    shapes = [
        {"type": "path", "path": fill, "xref": xref, "yref": yref, "fillcolor": BLOCKED_COLOR,
         "line": {"width": 0}, "layer": "above"}
    ]  # fmt: skip
    if crosses:
        d = 0.22
        path = "".join(
            f"M{j - d},{i - d}L{j + d},{i + d}M{j - d},{i + d}L{j + d},{i - d}"
            for i, j in np.argwhere(blocked)
        )
        shapes.append(
            {"type": "path", "path": path, "xref": xref, "yref": yref, "layer": "above",
             "line": {"color": CROSS_COLOR, "width": 1.5}}
        )  # fmt: skip
    return shapes


def _blocked_legend(name: str = "blocked (masked out)") -> go.Scatter:
    """A legend entry for the grey ✕ cells (the cells themselves are shapes)."""
    return go.Scatter(
        x=[None],
        y=[None],
        mode="markers",
        marker={
            "symbol": "square-x",
            "size": 14,
            "color": BLOCKED_COLOR,
            "line": {"color": CROSS_COLOR, "width": 1},
        },
        name=name,
        showlegend=True,
        hoverinfo="skip",
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


def _blocked_mask(blocked, shape: tuple[int, ...], block: tuple[int, int]) -> np.ndarray | None:
    """`blocked` broadcast to `shape` `(..., R, C)` of the plotted values (a block counts as
    blocked when all of it is), or None when nothing is blocked."""
    if blocked is None:
        return None
    mask = np.asarray(blocked, bool)
    if block != (1, 1):
        mask = (
            block_mean(mask.astype(float), -(-mask.shape[-2] // block[0]), -(-mask.shape[-1] // block[1]))[0]
            == 1
        )
    mask = np.broadcast_to(mask, shape)
    return mask if mask.any() else None


def weight_scale(
    values: np.ndarray, blocked: np.ndarray | None, value_name: str = "weight"
) -> tuple[float, str]:
    """Top of the colour scale for `(..., R, C)` and a sentence saying how it was chosen.

    A row with a single allowed key holds one weight of exactly 1 (e.g. row 0 of a
    causal mask); letting it set the top would wash every other row out. The top is the
    largest value in rows with at least two allowed keys; rows above it show the darkest colour.
    """
    allowed = np.ones(values.shape, bool) if blocked is None else ~np.broadcast_to(blocked, values.shape)
    informative = allowed.sum(-1) >= 2  # (..., R)
    finite = np.isfinite(values)
    overall = float(values[finite].max(initial=0.0))
    rows = values[informative]  # (n, C)
    top = float(rows[np.isfinite(rows)].max(initial=0.0)) if rows.size else overall
    if not informative.any() or top <= 0:
        top = overall
    if overall <= 0:  # all blocked, or no difference anywhere
        return 1.0, f"Colour scale 0 to 1; every {value_name} shown is 0."
    if top < overall:
        return top, (
            f"Colour scale 0 to {top:.3g}: the largest {value_name} in rows with two or more allowed keys. "
            f"A row with a single allowed key holds one {value_name} of 1 and is drawn at the darkest colour, "
            "so it does not wash out the others."
        )
    return top, f"Colour scale 0 to {top:.3g}, the largest {value_name} shown."


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
    values, q_names, k_names, block = _fit(np.asarray(weights, np.float64), q_labels, k_labels, max_cells)
    lq, lk = values.shape[1:]
    mask = _blocked_mask(blocked, values.shape, block)
    cols = max(1, min(H, cols or default_columns(H, max(lq, lk))))
    rows = math.ceil(H / cols)
    cell = cell_px(lq)
    font = _font_px(cell)
    band = _x_band_px(k_names, font)
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
            for shape in _blocked_shapes(
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
        fig.add_trace(_blocked_legend(), row=1, col=1)
    fig.update_yaxes(type="category", showgrid=False, **_cell_range(lq, True), **_axis_ticks(q_names, font))
    fig.update_xaxes(
        **_cell_range(lk),
        type="category",
        showgrid=False,
        tickangle=_x_angle(k_names),
        **_axis_ticks(k_names, font),
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
    shown, rows, cols, block = _fit(np.where(blocked, np.nan, values), row_labels, col_labels, max_cells)
    R, C = shown.shape
    mask = _blocked_mask(blocked, shown.shape, block)
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
    font = _font_px(cell)
    x_shown = cols[:: label_stride(C, x_label_limit)]
    band = _x_band_px(x_shown, font) + (20 if x_title else 0)
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
        for shape in _blocked_shapes(mask, "x", "y", crosses=cell >= 14 and len(r) <= 4000):
            fig.add_shape(shape)
    fig.update_yaxes(**_cell_range(R, True), type="category", showgrid=False, zeroline=False, automargin=True,
                     **_axis_ticks(rows, font))  # fmt: skip
    fig.update_xaxes(
        **_cell_range(C),
        type="category",
        showgrid=False,
        zeroline=False,
        tickangle=_x_angle(x_shown),
        **_axis_ticks(cols, font, x_label_limit),
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
    font = _font_px(cell)
    band = _x_band_px(cols, font)
    fig.update_yaxes(
        autorange="reversed", type="category", showgrid=False, automargin=True, **_axis_ticks(rows, font)
    )
    fig.update_xaxes(type="category", showgrid=False, tickangle=_x_angle(cols), **_axis_ticks(cols, font))
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
