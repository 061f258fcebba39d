"""FlashAttention's tiles, drawn: where the pass is, the running max and denominator per query row, the
output rows closing in on the full softmax, and the memory held against the L × L matrix.

NumPy in, `go.Figure` out (`attnviz.kernels.replay` computes the arrays).
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from attnviz import formats
from attnviz.plots import heatmaps
from attnviz.plots.labels import label_stride, safe_labels, x_angle, x_band_px

# A cell's state (attnviz.kernels.replay: TODO, DONE, CURRENT, SKIPPED, MASKED) → its colour and legend name.
STATES = (("#ffffff", "not yet"), ("#d9d9d9", "computed, then dropped"), ("#ffffff", "held now"),
          ("#737373", "tile skipped (wholly above the diagonal)"),
          ("#fdd0a2", "masked to −∞ (above the diagonal, in a computed tile)"))  # fmt: skip
_MARGIN = {"l": 60, "r": 20, "t": 60, "b": 60}


TICK_LIMIT = 24  # keys labelled in the grid: at a phone's width (390 px) 24 upright-turned labels fit
TICK_FONT_PX = 12
BAR_PX = 170  # the colour bar: with its name, right of the query labels and the axis title, in 390 px
TITLES_PX = 56  # a title and its subtitle (plotly puts the subtitle 17 px under the title)
LEGEND_PX = 110  # the legend's band under the key labels: four rows at a phone's width


def _ticks(labels: list[str]) -> dict:
    every = label_stride(len(labels), TICK_LIMIT)
    shown = safe_labels(labels)[::every]
    return {
        "tickvals": list(range(0, len(labels), every)),
        "ticktext": shown,
        "tickfont": {"size": TICK_FONT_PX},
    }


def _hang_title(fig: go.Figure, title: str, subtitle: str, height: int) -> int:
    """Hang the title (and its subtitle, a line under it) from the figure's left edge under the band of
    plotly's mode bar: a long title at the top reached under the toolbar, and a title of two lines
    (`<br>`) is drawn 12 px higher than one. Returns the pixels both take from the figure's top."""
    fig.update_layout(
        title={"text": title, "subtitle": {"text": subtitle}, "x": 0, "xref": "container", "xanchor": "left",
               "pad": {"l": 8}, "y": 1 - (heatmaps.TOOLBAR_PX + 4) / height, "yref": "container", "yanchor": "top"}
    )  # fmt: skip
    return heatmaps.TOOLBAR_PX + 4 + TITLES_PX


def tile_grid(
    status: np.ndarray, scores: np.ndarray | None, queries: range, keys: range, labels: list[str], title: str
) -> go.Figure:
    """The Lq × Lk score grid with the tile held now in colour and every other cell's state in grey.

    Laid out as the app's heatmaps (`heatmaps.Header`): the title, then the scores' colour bar, flat at
    the top left with its name beside it, so the grid keeps a phone's whole width; the key labels
    upright or turned by `labels.x_angle`, every k-th above `TICK_LIMIT`.

    Args:
        status: `(Lq, Lk)` states (`attnviz.kernels.replay.status`).
        scores: the held tile's scaled scores `(rows, keys)`, −inf where masked; None for a skipped tile.
        queries, keys: the held tile's rows and keys.
        labels: the tokens (queries and keys: self-attention).
    """
    Lq, Lk = status.shape
    header = heatmaps.Header(title, colorbar=scores is not None, bar_px=BAR_PX)
    x_ticks, plot_px = _ticks(labels[:Lk]), max(200, min(480, 22 * Lq))
    band = x_band_px(x_ticks["ticktext"], TICK_FONT_PX) + 30  # the labels and the axis title
    height = header.height + 10 + plot_px + band + LEGEND_PX
    fig = go.Figure(
        go.Heatmap(
            z=status, zmin=0, zmax=len(STATES) - 1, showscale=False, hoverinfo="skip", xgap=1, ygap=1,
            colorscale=[[i / (len(STATES) - 1), c] for i, (c, _) in enumerate(STATES)],
        )
    )  # fmt: skip
    if scores is not None:
        shown = np.where(np.isfinite(scores), scores, np.nan)  # masked cells: the status colour below
        fig.add_trace(
            go.Heatmap(
                z=shown, x=list(keys), y=list(queries), colorscale="Viridis", xgap=1, ygap=1,
                colorbar=header.colorbar_spec(height),
                text=[[f"{x:.1f}" if np.isfinite(x) else "−∞" for x in row] for row in scores] if shown.size <= 256 else None,
                texttemplate="%{text}" if shown.size <= 256 else None,
                hovertemplate="query %{y}, key %{x}<br>score %{z:.3f}<extra></extra>",
            )
        )  # fmt: skip
        fig.add_annotation(header.colorbar_name("score", header.height + 10))
    fig.add_shape(type="rect", x0=keys.start - 0.5, x1=keys.stop - 0.5, y0=queries.start - 0.5,
                  y1=queries.stop - 0.5, line={"color": "#d62728", "width": 3})  # fmt: skip
    for i, (color, name) in enumerate(STATES):
        if i != 2 and (status == i).any():
            fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=name,
                                     marker={"symbol": "square", "size": 12, "color": color,
                                             "line": {"color": "#8c8c8c", "width": 1}}))  # fmt: skip
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name="the tile held now",
                             marker={"symbol": "square-open", "size": 12, "color": "#d62728"}))  # fmt: skip
    header.apply(fig, height)
    fig.update_layout(  # the title from the figure's left edge, not the grid's: a phone fits it on one line
        title={"xref": "container", "x": 0, "pad": {"l": 8}},
        height=height, margin={"l": 10, "r": 20, "t": header.height + 10, "b": band + LEGEND_PX},
        plot_bgcolor="#ffffff",
        xaxis={"title": "key", "range": [-0.5, Lk - 0.5], "tickangle": x_angle(x_ticks["ticktext"]), **x_ticks},
        yaxis={"title": "query", "range": [Lq - 0.5, -0.5], **_ticks(labels[:Lq])},
        legend={"orientation": "h", "x": 0, "xanchor": "left", "yref": "container", "y": 0, "yanchor": "bottom"},
    )  # fmt: skip
    return fig


def running_stats(
    rows: range, m: tuple[np.ndarray, np.ndarray], l: tuple[np.ndarray, np.ndarray],
    final: tuple[np.ndarray, np.ndarray], labels: list[str],
) -> go.Figure:  # fmt: skip
    """The held query rows' running max m and denominator l, before and after the tile, with each row's
    final value (its max and sum of exp over every allowed key) as the target.

    Args:
        rows: the query rows.
        m, l: `(before, after)`, each `(rows,)`; before the first tile m = −∞ and l = 0.
        final: `(max, sum of exp)` of each row over all its keys, `(rows,)` each.
        labels: the tokens.
    """
    names = [f"{r}: {t}" for r, t in zip(rows, safe_labels([labels[r] for r in rows]), strict=True)]
    fig = make_subplots(1, 2, subplot_titles=("running max m", "denominator l"), horizontal_spacing=0.12)
    for col, (before, after), target in ((1, m, final[0]), (2, l, final[1])):
        first = col == 1
        before = np.where(np.isfinite(before), before, np.nan)  # −∞: nothing seen yet, no bar
        fig.add_trace(go.Bar(y=names, x=before, orientation="h", name="before this tile",
                             marker_color="#c6dbef", showlegend=first), 1, col)  # fmt: skip
        fig.add_trace(go.Bar(y=names, x=after, orientation="h", name="after this tile",
                             marker_color="#2171b5", showlegend=first), 1, col)  # fmt: skip
        fig.add_trace(go.Scatter(y=names, x=target, mode="markers", name="final (whole row)",
                                 marker={"symbol": "line-ns-open", "size": 18, "color": "#d62728",
                                         "line": {"width": 3}}, showlegend=first), 1, col)  # fmt: skip
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_yaxes(showticklabels=False, row=1, col=2)  # the same rows as the left panel
    height = max(340, 46 * len(rows) + 180)
    top = _hang_title(fig, "m and l per query row", "before and after this tile", height)  # fits 390 px
    fig.update_layout(
        barmode="group", height=height, margin={**_MARGIN, "t": top + 30},  # the panels' titles under it
        legend={"orientation": "h", "y": -0.2},
    )  # fmt: skip
    return fig


def convergence(
    distance: np.ndarray, k_blocks: list[int], skipped: list[bool], current: int, rows: range, labels: list[str],
    rounding: float,
) -> go.Figure:  # fmt: skip
    """max |output so far − full softmax| per query row after each key block, up to the held tile, on a log
    scale down to the precision's rounding (where the two are equal).

    Args:
        distance: `(steps, rows)` for the steps of one query block (`attnviz.kernels.replay.distance`).
        k_blocks, skipped: those steps' key blocks, and which were skipped (drawn hollow).
        current: how many of the steps have run (the held tile included).
        rows, labels: the query rows and the tokens.
        rounding: the difference rounding alone leaves (drawn dashed, a grey band below it; smaller values
            sit on it as triangles, their own value in the hover).
    """
    fig = go.Figure()
    bottom = 10 ** (np.log10(rounding) - 0.5)
    # At or below rounding the tiled rows equal the full softmax: a grey band, labelled in the plot,
    # and those points drawn as triangles pointing down (a 0 has no place on a log axis).
    fig.add_hrect(y0=bottom, y1=rounding, fillcolor="#d4d4d4", opacity=0.45, line_width=0, layer="below")
    fig.add_annotation(x=0, xref="paper", xanchor="left", y=np.log10(rounding) - 0.25, yref="y",
                       text="at or below rounding (triangles): no difference", showarrow=False,  # fits 390 px
                       font={"size": 11, "color": "#525252"})  # fmt: skip
    for r, row in enumerate(rows):
        y = distance[:current, r]
        shapes = ["triangle-down" if not v > rounding else "circle" for v in y]
        symbols = [
            s + ("-open" if hollow else "") for s, hollow in zip(shapes, skipped[:current], strict=True)
        ]
        fig.add_trace(
            go.Scatter(
                x=k_blocks[:current], y=np.maximum(np.nan_to_num(y, nan=0.0), rounding), customdata=y,
                mode="lines+markers", marker={"symbol": symbols, "size": 9},
                name=f"{row}: {safe_labels([labels[row]])[0]}",
                hovertemplate="after key block %{x}: %{customdata:.3g}<extra></extra>",
            )
        )  # fmt: skip
    fig.add_trace(go.Scatter(x=[-0.5, max(k_blocks) + 0.5], y=[rounding, rounding], mode="lines",
                             line={"dash": "dash", "color": "#737373"}, hoverinfo="skip",
                             name="rounding: equal to the full softmax"))  # fmt: skip
    top = max(float(np.nanmax(distance)), rounding * 100)
    top = _hang_title(
        fig, "Each row against the full softmax", "max |difference| per key block", 400 + LEGEND_PX
    )
    fig.update_layout(
        # The legend under the plot: on the right it left a phone's plot 60 px wide.
        height=400 + LEGEND_PX, margin={**_MARGIN, "t": top + 10, "b": 60 + LEGEND_PX},
        legend={"title": "query row", "orientation": "h", "x": 0, "xanchor": "left", "yref": "container", "y": 0,
                "yanchor": "bottom"},
        yaxis={"title": "max |tiled − full|", "type": "log", "exponentformat": "power",
               "range": [np.log10(bottom), np.log10(top) + 0.3]},
        xaxis={"title": "key blocks visited (hollow: skipped)", "range": [-0.5, max(k_blocks) + 0.5], "dtick": 1},
    )  # fmt: skip
    return fig


def memory_curve(lengths: np.ndarray, tiled: np.ndarray, full: np.ndarray, prompt: int) -> go.Figure:
    """Bytes held against sequence length, log-log: the tiled pass (flat: its tiles do not grow with L)
    and the L × L score matrix (quadratic); a marker at the prompt's length."""
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=lengths, y=full, mode="lines", name="L × L score matrix (never formed)"))
    fig.add_trace(go.Scatter(x=lengths, y=tiled, mode="lines", name="tiled pass: largest tiles held"))
    at = int(np.searchsorted(lengths, prompt))
    fig.add_trace(go.Scatter(x=[prompt, prompt], y=[tiled[at], full[at]], mode="markers", marker={"size": 10},
                             name=f"your prompt (L = {prompt})"))  # fmt: skip
    top = _hang_title(fig, "Memory of one head's attention", "against sequence length", 420)
    fig.update_layout(
        height=420, margin={**_MARGIN, "t": top + 10},
        xaxis={"title": "sequence length L (tokens)", "type": "log"},
        yaxis={"title": "bytes", "type": "log", **iec_ticks(min(tiled.min(), full.min()), max(tiled.max(), full.max()))},
        legend={"orientation": "h", "y": -0.25},
    )  # fmt: skip
    return fig


def iec_ticks(low: float, high: float) -> dict:
    """Log-axis ticks at 1 and 32 of each binary unit (1 KiB, 32 KiB, 1 MiB …) labelled in KiB/MiB/GiB,
    the units the page's text uses (Plotly's SI format wrote kB and MB: powers of 1000)."""
    ticks = [2**k for k in range(0, 10 * len(formats.UNITS), 5) if low / 2 <= 2**k <= high * 2]
    return {"tickmode": "array", "tickvals": ticks, "ticktext": [formats.size(t) for t in ticks]}
