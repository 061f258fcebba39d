"""Figures for rotary positions (RoPE) and grouped K/V heads (GQA / MQA): NumPy in, `go.Figure` out.

RoPE as Su et al. (2021) define it and Llama lays it out (`rotate_half`: feature i
pairs with i + d/2); GQA as Ainslie et al. (2023): K/V head g serves query heads
g·r … g·r + r − 1.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from attnviz import formats

SMALL = {"margin": {"l": 10, "r": 10, "t": 60, "b": 10}, "height": 360}
# A legend under the plot, across its width: at a phone's width a legend at the right took half the plot.
BELOW = {"orientation": "h", "y": -0.22, "yanchor": "top", "x": 0, "font": {"size": 10}}


def pair_rotation(before: np.ndarray, after: np.ndarray, position: int, title: str = "") -> go.Figure:
    """Each pair (x_i, x_{i+d/2}) of one row as a point in the plane, before and after RoPE.

    The axes share one scale and one range, centred on the origin (`scaleanchor`, a square plot), and
    each pair's circle is drawn with the arc it turned along: both points of a pair lie on its circle,
    which is the caption's claim (RoPE turns, it never stretches).

    Args:
        before, after: `(d,)` one query's (or key's) features before and after the rotation.
        position: the row's position (its angle for pair i is position · base^(−2i/d)).
    """
    before, after = np.asarray(before, np.float64), np.asarray(after, np.float64)
    half = len(before) // 2
    fig = go.Figure()
    for i in range(half):  # the pair's circle (its length), and the arc it turned along, counter-clockwise
        radius = float(np.hypot(before[i], before[i + half]))
        start = np.arctan2(before[i + half], before[i])
        turn = (np.arctan2(after[i + half], after[i]) - start) % (2 * np.pi)
        for angles, line in (
            (np.linspace(0, 2 * np.pi, 73), {"color": "#e0e0e0", "width": 1, "dash": "dot"}),
            (start + np.linspace(0, turn, 25), {"color": "#9e9e9e", "width": 1.5}),
        ):
            fig.add_trace(
                go.Scatter(
                    x=radius * np.cos(angles),
                    y=radius * np.sin(angles),
                    mode="lines",
                    line=line,
                    showlegend=False,
                    hoverinfo="skip",
                    meta={"pair": i, "radius": radius},
                )
            )
    for name, xy, symbol, color in (
        ("before", before, "circle-open", "#1565c0"),
        ("after RoPE", after, "circle", "#e65100"),
    ):
        fig.add_trace(
            go.Scatter(
                x=xy[:half],
                y=xy[half:],
                mode="markers+text",
                name=name,
                marker={"symbol": symbol, "size": 10, "color": color},
                text=[str(i) if name != "before" else "" for i in range(half)],
                textposition="top center",
                customdata=np.arange(half),
                hovertemplate="pair %{customdata}: (%{x:.3f}, %{y:.3f})<extra>" + name + "</extra>",
            )
        )
    reach = 1.15 * max(float(np.hypot(before[:half], before[half:]).max(initial=0.0)), 1e-9)
    square = {"range": [-reach, reach], "zeroline": True, "zerolinecolor": "#bdbdbd", "constrain": "domain"}
    fig.update_layout(
        title=title or f"Pairs (i, i+d/2) at position {position}: turned",
        xaxis={**square, "title": "feature i"},
        yaxis={**square, "title": "feature i + d/2", "scaleanchor": "x", "scaleratio": 1},
        **SMALL,
    )
    return fig


def band_scores(scores: np.ndarray, offsets: np.ndarray, base: float, bands: int = 6) -> go.Figure:
    """q·k after RoPE against the offset between query and key, one line per frequency band.

    Args:
        scores: `(d/2, n)` from `attnviz.reference.rope_band_scores`.
        offsets: `(n,)` the offsets (query position − key position).
        bands: how many bands to draw, spread from fastest to slowest; their mean is drawn too.
    """
    half = scores.shape[0]
    shown = sorted(set(np.linspace(0, half - 1, min(bands, half)).round().astype(int)))
    fig = go.Figure()
    for i in shown:
        fig.add_trace(
            go.Scatter(
                x=offsets, y=scores[i], mode="lines", name=f"band {i}: θ = {base:g}^(−{2 * i}/{2 * half})"
            )
        )
    fig.add_trace(
        go.Scatter(
            x=offsets,
            y=scores.mean(0),
            mode="lines",
            name="mean of all bands",
            line={"width": 4, "color": "black"},
        )
    )
    fig.update_layout(
        title="q·k after RoPE vs the offset, per band",
        xaxis_title="offset (query position − key position)",
        yaxis_title="q·k (same unit q and k)",
        legend=BELOW,
        **{**SMALL, "height": 440},
    )
    return fig


def kv_sharing(n_heads: int, n_kv_heads: int) -> go.Figure:
    """Which query heads read which K/V head: query heads on top, K/V heads below, a line per reader."""
    r = n_heads // n_kv_heads
    qx = np.arange(n_heads, dtype=float)
    kvx = np.array([g * r + (r - 1) / 2 for g in range(n_kv_heads)])  # each K/V head under its group
    colors = [f"hsl({int(360 * g / max(n_kv_heads, 1))}, 60%, 45%)" for g in range(n_kv_heads)]
    fig = go.Figure()
    for h in range(n_heads):
        g = h // r
        fig.add_trace(
            go.Scatter(
                x=[qx[h], kvx[g]],
                y=[1, 0],
                mode="lines",
                line={"color": colors[g]},
                showlegend=False,
                hoverinfo="skip",
            )
        )
    fig.add_trace(
        go.Scatter(
            x=qx,
            y=np.ones(n_heads),
            mode="markers+text",
            marker={"size": 22, "color": [colors[h // r] for h in range(n_heads)]},
            text=[f"q{h}" for h in range(n_heads)],
            textposition="top center",
            name="query heads",
            hovertemplate="query head %{text}<extra></extra>",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=kvx,
            y=np.zeros(n_kv_heads),
            mode="markers+text",
            marker={"size": 30, "symbol": "square", "color": colors},
            text=[f"K/V {g}" for g in range(n_kv_heads)],
            textposition="bottom center",
            name="K/V heads",
            hovertemplate="%{text}<extra></extra>",
        )
    )
    kind = "MHA" if r == 1 else "MQA" if n_kv_heads == 1 else f"GQA, {r} per group"
    fig.update_layout(
        title=f"{n_heads} query heads read {n_kv_heads} K/V head{'s' if n_kv_heads > 1 else ''} ({kind})",
        xaxis={"visible": False},
        yaxis={"visible": False, "range": [-0.6, 1.6]},
        showlegend=False,
        **{**SMALL, "height": 260},
    )
    return fig


def kv_cache_bars(tables: dict[str, dict[str, int]], *, log: bool = True) -> go.Figure:
    """KV-cache bytes per token, grouped bars: model (or configuration) → {layout label → bytes}.

    `log=False`: a linear axis from 0, so a bar 3× shorter is a cache 3× smaller (the lesson's one
    model: a log axis starting near the smallest bar made GQA's 22.5 KiB look 20× smaller than MHA's
    67.5 KiB; issue 46, point 8). A log axis where a toy configuration sits beside a real model."""
    fig = go.Figure()
    for model, rows in tables.items():
        labels = list(rows)
        fig.add_trace(
            go.Bar(
                name=model,
                x=[label.split(" ")[0] for label in labels],
                y=list(rows.values()),
                text=[formats.size(b) for b in rows.values()],
                textposition="outside",
                hovertext=labels,
            )
        )
    scale = "log scale" if log else "from 0"
    fig.update_layout(
        title="KV-cache bytes per token",
        yaxis={
            "title": {"text": f"bytes per token ({scale})"},
            "type": "log" if log else "linear",
            **({} if log else {"rangemode": "tozero"}),
        },
        barmode="group",
        legend=BELOW,
        **{**SMALL, "height": 420},
    )
    return fig


def kv_cache_note(n_heads: int, n_kv_heads: int) -> str:
    """What the Step-by-step page's KV-cache bars leave unsaid: why the configuration may have no GQA
    bar, and why SmolLM2's bytes are half those the other pages give (2-byte values, not float32)."""
    said = ""
    if not 1 < n_kv_heads < n_heads:
        layout = "MQA" if n_kv_heads == 1 else "MHA"
        said = (
            f"This configuration has no GQA bar: its {n_heads} query head{'s' * (n_heads > 1)} read "
            f"{n_kv_heads} K/V head{'s' * (n_kv_heads > 1)}, which is {layout}; choose a K/V head count "
            f"between 1 and {n_heads} to see one. "
        )
    return said + (
        "SmolLM2's bars count 2 bytes per value, as its weights are stored and served; the Models, "
        "Decoding and Tiles pages count float32 (4 bytes), what attnviz computes in, so their figures for "
        "SmolLM2 are twice these."
    )
