"""Interpretability figures: the logit lens, a patching sweep, a head-role scan, an ablation test.

NumPy (and the result dataclasses of `attnviz.interp`) in, `go.Figure` out.
"""

from __future__ import annotations

import textwrap

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from attnviz import formats
from attnviz.plots import colorbar
from attnviz.plots.heatmaps import TOOLBAR_PX
from attnviz.plots.labels import safe_labels

ROLE_TITLES = {
    "previous_token": "previous token",
    "induction": "induction",
    "duplicate_token": "duplicate token",
    "first_token": "first token (sink)",
}
_MARGIN = {"l": 70, "r": 20, "t": 60, "b": 60}
_BOTTOM_PX = 150  # layer × head maps: the heads' labels, the axis title, then the colour bar and its name
# (in Streamlit's theme the axis title sits ~20 px lower than in plotly's own: at 120 it met the name)
_TITLE_RISE_PX = 12  # how much higher plotly draws a title of several lines (`<br>`) than one
_BAR_BOX_PX = 56  # the top of that colour bar's box (its padding included), above the figure's bottom edge


def _layer_names(n: int, last_is_output: bool = False) -> list[str]:
    names = [f"L{i}" for i in range(n)]
    if last_is_output:
        names = ["embed", *[f"after L{i}" for i in range(n - 1)]]
    return names


def lens_grid(probs: np.ndarray, labels: np.ndarray, tokens: list[str]) -> go.Figure:
    """Layer × position grid of the most likely next token, coloured by its probability.

    Args:
        probs: `(L + 1, T, k)` top-k probabilities, most likely first.
        labels: `(L + 1, T, k)` those tokens as text.
        tokens: the prompt's T tokens (the x axis: the position the prediction is made at).
    """
    rows, T, k = probs.shape
    y = _layer_names(rows, last_is_output=True)
    x = safe_labels([f"{i}: {_short(t, limit=12)}" for i, t in enumerate(tokens)])  # ␣ as in the cells
    shown = [[_short(labels[r, t, 0]) for t in range(T)] for r in range(rows)]
    hover = [
        [
            "<br>".join(f"{_short(labels[r, t, j])!s}: {probs[r, t, j]:.1%}" for j in range(k))
            for t in range(T)
        ]
        for r in range(rows)
    ]
    fig = go.Figure(
        go.Heatmap(
            z=probs[:, :, 0],
            x=x,
            y=y,
            text=shown,
            texttemplate="%{text}",
            customdata=hover,
            hovertemplate="layer %{y}, position %{x}<br>top %{customdata}<extra></extra>".replace(
                "top %{customdata}", "top tokens:<br>%{customdata}"
            ),
            colorscale="Blues",
            zmin=0,
            zmax=1,
            colorbar={"title": "p(top)", "tickformat": ".0%"},
        )
    )
    fig.update_layout(
        title="Logit lens: the most likely next token after each layer",
        height=max(320, 34 * rows + 160),
        margin=_MARGIN,
        xaxis={"title": "position (the token read)", "tickangle": -40},
        yaxis={"title": "residual stream", "autorange": "reversed"},
    )
    return fig


def position_labels(tokens: list[str]) -> list[str]:
    """ "i: token" per position, the token's own spaces drawn and the separator's not ("1: ␣Mary")."""
    return [f"{i}: {formats.token(t)}" for i, t in enumerate(tokens)]


def _short(text: str, limit: int = 10) -> str:
    text = formats.token(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


NOTABLE = 0.1  # a layer × head map writes the values of cells at least this share of its largest |value|


def _stacked_title(title: str, width: int = 44) -> tuple[str, int]:
    """A long title as a short head over smaller wrapped lines (plotly does not wrap a title, and a
    phone's 390 px cut one line of 90 characters): split after its first ": " or before its first
    " (". Returns the title's markup and how many lines it takes under the head."""
    for cut, head_ends, rest_starts in ((": ", 1, 2), (" (", 0, 1)):  # "Head: rest", "Head (rest)"
        at = title.find(cut)
        if at > 0:
            head, rest = title[: at + head_ends], title[at + rest_starts :]
            break
    else:
        return title, 0
    lines = [line for part in rest.split(" · ") for line in textwrap.wrap(part, width)] or [
        ""
    ]  # "·": a new line
    return f"{head}<br><sup>{'<br>'.join(lines)}</sup>", len(lines)


def layer_head_heatmap(
    grid: np.ndarray,
    title: str,
    value_name: str,
    *,
    diverging: bool = False,
    fmt: str = ".2f",
    limit: float | None = None,
) -> go.Figure:
    """One value per (layer, head): rows are layers, columns heads; NaN cells are left blank.

    `limit` (diverging maps): the colour scale runs from −limit to +limit, so two maps drawn with
    the same limit share their colours (default: the map's own largest |value|)."""
    L, H = grid.shape
    top = _largest(grid)
    notable = _notable(grid)
    text = [
        [format(v, fmt) if keep else "" for v, keep in zip(row, keeps, strict=True)]
        for row, keeps in zip(grid, notable, strict=True)
    ]
    fig = go.Figure(
        go.Heatmap(
            z=grid,
            x=[f"H{h}" for h in range(H)],
            y=[f"L{layer}" for layer in range(L)],
            text=text,
            texttemplate="%{text}" if L * H <= 400 else None,
            textfont={"size": 11},
            hovertemplate=f"layer %{{y}}, head %{{x}}<br>{value_name}: %{{z:{fmt}}}<extra></extra>",
            colorscale="RdBu" if diverging else "Viridis",
            zmid=0 if diverging and limit is None else None,
            zmin=(-limit if limit is not None else None) if diverging else 0,
            zmax=(limit if limit is not None else None) if diverging else max(1.0, top),
        )
    )
    fig.add_trace(_head_targets(L, H))
    head, lines = _stacked_title(title)
    rise = _TITLE_RISE_PX if lines else 0  # plotly draws a title of several lines this much higher
    height = max(300, 26 * L + 180) + 20 * lines + rise
    fig.update_traces(  # under the map, not beside it: at a phone's width a side bar took a third of the cells' room
        colorbar={"orientation": "h", "yref": "container", "y": _BAR_BOX_PX / height, "yanchor": "top",
                  "thickness": colorbar.BAR_THICK_PX, "len": 0.8},
        selector={"type": "heatmap"},
    )  # fmt: skip
    # Its name centred above it, clear of it (as the bar's own title on side "top" it touched the bar).
    fig.add_annotation(
        colorbar.bar_name(value_name, x=0.5, xanchor="center", y=0, yanchor="bottom",
                          yshift=_BAR_BOX_PX + colorbar.NAME_GAP_PX - _BOTTOM_PX)
    )  # fmt: skip
    fig.update_layout(
        # Hung from the figure's top edge: centred on its default position, a title of several lines
        # grew upwards out of the figure.
        # The pad makes up for a title of several lines drawn higher (`rise`: the walk saw "Exact:"
        # touching the chart's top edge).
        title={
            "text": head,
            "yref": "container",
            "y": 1,
            "yanchor": "top",
            "pad": {"t": 14 + rise},
        },
        height=height,
        margin={**_MARGIN, "t": 44 + rise + 18 * lines, "b": _BOTTOM_PX},
        xaxis={"title": "head", "side": "bottom"},
        yaxis={"title": "layer", "autorange": "reversed"},
    )
    return fig


def _largest(grid: np.ndarray) -> float:
    top = float(np.nanmax(np.abs(grid))) if np.isfinite(grid).any() else 1.0
    return max(top, 1e-9)


def _notable(grid: np.ndarray) -> np.ndarray:
    """`(L, H)` True where a layer × head map writes its number: the cells that stand out (|value| ≥
    NOTABLE of the largest), at a size a phone can read (on SmolLM2's 30 × 9 map at 390 px, 270 numbers
    shrank to unreadable dots; colour and hover give the rest)."""
    return np.nan_to_num(np.abs(grid), nan=0.0) >= NOTABLE * _largest(grid)


def numbers_note(grid: np.ndarray, value_name: str) -> str:
    """What a caption under `layer_head_heatmap(grid, …)` says about its numbers ("" when every cell
    has one). Not in the title: with it, the Interpretability page's titles wrapped to four lines."""
    L, H = grid.shape
    if L * H > 400:
        return f"Hover a cell for its {value_name}."
    if _notable(grid).all():
        return ""
    return (
        f"Numbers on the cells where |{value_name}| is at least {NOTABLE:.0%} of the largest; hover any cell."
    )


def _head_targets(L: int, H: int, cell: int = 22, xaxis: str = "x", yaxis: str = "y") -> go.Scatter:
    """Invisible markers on every (layer, head) cell: a click selects that head (heatmap cells cannot be
    selected in plotly); `customdata` is `(layer, head)`."""
    return go.Scatter(
        x=[f"H{h}" for _ in range(L) for h in range(H)],
        y=[f"L{layer}" for layer in range(L) for _ in range(H)],
        customdata=[[layer, h] for layer in range(L) for h in range(H)],
        mode="markers",
        marker={"size": cell, "symbol": "square", "opacity": 0, "color": "black"},
        selected={"marker": {"opacity": 0}},
        unselected={"marker": {"opacity": 0}},
        hoverinfo="skip",
        showlegend=False,
        xaxis=xaxis,
        yaxis=yaxis,
    )


def patching_heatmap(restored: np.ndarray) -> go.Figure:
    """The fraction of the clean − corrupted logit difference each head restores when patched."""
    return layer_head_heatmap(
        restored,
        "Activation patching: share of the difference restored (1 = all)",
        "restored",
        diverging=True,
    )


def role_heatmaps(scores: dict[str, np.ndarray]) -> go.Figure:
    """One layer × head panel per role, all on one 0–1 scale."""
    roles = list(scores)
    L, H = next(iter(scores.values())).shape
    # One layer axis for all panels (labelled once, on the left): at a phone's width four sets of
    # labels were drawn over the neighbouring panels. Titles break at their space to fit a panel.
    fig = make_subplots(
        rows=1,
        cols=len(roles),
        shared_yaxes=True,
        horizontal_spacing=0.03,
        subplot_titles=[ROLE_TITLES.get(r, r).replace(" ", "<br>") for r in roles],
    )
    fig.update_annotations(font_size=11)  # a word per line, ~50 px: a panel's width on a phone
    for i, role in enumerate(roles, start=1):
        fig.add_trace(
            go.Heatmap(
                z=scores[role],
                x=[f"H{h}" for h in range(H)],
                y=[f"L{layer}" for layer in range(L)],
                zmin=0,
                zmax=1,
                colorscale="Viridis",
                showscale=i == len(roles),
                colorbar={"title": "score"},
                hovertemplate=f"{ROLE_TITLES.get(role, role)}<br>layer %{{y}}, head %{{x}}: %{{z:.2f}}<extra></extra>",
            ),
            row=1,
            col=i,
        )
        fig.add_trace(_head_targets(L, H, 14), row=1, col=i)
        fig.update_yaxes(autorange="reversed", row=1, col=i)
    # the title hung under the mode bar's band, then the panels' three-line titles under it: at plotly's
    # own place on a phone the title's second line ran into "first token (sink)" (issue 46, point 19)
    title = "Head roles on repeated random tokens<br><sup>score 0–1 per head; click a head to see it</sup>"
    fig.update_layout(
        title={
            "text": title,
            "yref": "container",
            "y": 1,
            "yanchor": "top",
            "pad": {"t": TOOLBAR_PX + _TITLE_RISE_PX},
        },
        height=max(320, 24 * L + 230),
        margin={**_MARGIN, "t": TOOLBAR_PX + 84},
    )
    return fig


def ablation_bars(baseline: float, top: float, random: list[float], k: int) -> go.Figure:
    """Second-half loss: no ablation, the top-k induction heads ablated, k random heads ablated."""
    names = ["nothing ablated", f"top {k} induction heads", f"{k} random heads (mean)"]
    values = [baseline, top, float(np.mean(random))]
    fig = go.Figure(
        go.Bar(
            x=names,
            y=values,
            marker_color=["#9e9e9e", "#d62728", "#1f77b4"],
            hovertemplate="%{x}: %{y:.4f} nats/token<extra></extra>",
            showlegend=False,
        )
    )
    fig.add_trace(
        go.Scatter(
            x=[names[2]] * len(random),
            y=random,
            mode="markers",
            marker={"color": "#0b3c6b", "size": 9, "symbol": "circle-open"},
            name="each random draw",
            hovertemplate="random draw: %{y:.4f}<extra></extra>",
        )
    )
    # Each value's label sits above its bar and, on the random bar, above the highest draw: a
    # label inside the cloud of circles could not be read (issue 33).
    high = max(values + list(random))
    for name, value, over in zip(names, values, (baseline, top, max([values[2], *random])), strict=True):
        fig.add_annotation(
            x=name, y=over, text=f"{value:.3f}", showarrow=False, yanchor="bottom", yshift=14,
            font={"size": 13}, bgcolor="rgba(255, 255, 255, 0.85)",
        )  # fmt: skip
    fig.update_layout(
        title="Loss on the repeated half (lower = the model predicts the repeat)",
        yaxis={"title": "cross-entropy (nats per token)", "range": [0, high * 1.18]},
        height=380,
        margin=_MARGIN,
        legend={"orientation": "h", "y": -0.2},
    )
    fig.layout.meta = {"labels_at": [baseline, top, max([values[2], *random])]}
    return fig
