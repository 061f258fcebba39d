"""The Interpretability page's circuit figures: direct logit attribution, its comparison with patching,
composition scores.

NumPy (and `attnviz.interp.dla.LogitAttribution`) in, `go.Figure` out; no Streamlit, no framework.
Shapes: L layers, H heads.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from attnviz import formats

_MARGIN = {"l": 70, "r": 20, "t": 60, "b": 60}
ATTENTION, MLP, OTHER = "#1f77b4", "#ff7f0e", "#7f7f7f"


def logit_parts(parts) -> go.Figure:
    """Where the logit difference comes from: the embeddings, each layer's heads (summed) and MLP,
    the biases; a dashed line at the model's own logit difference, which the bars add up to."""
    L = len(parts.mlps)
    groups = {  # legend name → (x, y, colour)
        "embeddings and biases": (
            ["embeddings", "biases"],
            [parts.embeddings, float(parts.attn_biases.sum() + parts.norm_bias)],
            OTHER,
        ),
        "a layer's heads (summed)": ([f"L{i} heads" for i in range(L)], list(parts.heads.sum(1)), ATTENTION),
        "a layer's MLP": ([f"L{i} MLP" for i in range(L)], list(parts.mlps), MLP),
    }
    order = ["embeddings"] + [f"L{i} {part}" for i in range(L) for part in ("heads", "MLP")] + ["biases"]
    fig = go.Figure(
        [
            go.Bar(x=x, y=y, name=name, marker_color=color, hovertemplate="%{x}: %{y:.3f}<extra></extra>")
            for name, (x, y, color) in groups.items()
        ]
    )
    fig.add_hline(
        y=parts.logit_diff,
        line_dash="dash",
        annotation_text=f"logit difference {parts.logit_diff:.3f} (the bars sum to {parts.total:.3f})",
        annotation={"bgcolor": "rgba(255, 255, 255, 0.85)"},
    )
    fig.update_layout(
        title=f"Direct contributions, by part:<br>logit({parts.answer!r}) − logit({parts.wrong!r})",
        height=460,
        margin={**_MARGIN, "t": 80},  # a title of two lines
        xaxis={
            "title": "layer (its heads, then its MLP)",
            "categoryorder": "array",
            "categoryarray": order,
            **_layer_ticks(L),
        },
        legend={"orientation": "h", "y": -0.45},
        yaxis={"title": "logit difference"},
    )
    return fig


LAYER_TICKS = 6  # at most this many layers named under the bars (62 rotated names ran into each other;
# at 390 px, 8 names and "embeddings"/"biases" beside them still did)


def _layer_ticks(L: int) -> dict:
    """Ticks under `logit_parts`' bars: every k-th layer, at its heads' bar. The grey end bars are named by
    the legend ("embeddings and biases") and every bar's full name is on hover."""
    layers = range(0, L, -(-L // LAYER_TICKS))
    return {
        "tickvals": [f"L{i} heads" for i in layers],
        "ticktext": [f"L{i}" for i in layers],
        "tickangle": 0,
    }


def dla_vs_patching(direct: np.ndarray, restored: np.ndarray, clean_diff: float) -> go.Figure:
    """Each head as a point: its direct share of the clean logit difference (x) against the share
    of the clean − corrupted difference patching it restores (y); the diagonal is "all direct"."""
    L, H = direct.shape
    share = direct / clean_diff if clean_diff else np.zeros_like(direct)
    names = [formats.head(layer, head) for layer in range(L) for head in range(H)]
    top = float(np.nanmax(np.abs(np.concatenate([share.ravel(), restored.ravel()]))))
    lim = max(top, 0.05) * 1.1
    fig = go.Figure(
        [
            go.Scatter(
                x=[-lim, lim],
                y=[-lim, lim],
                mode="lines",
                line={"dash": "dot", "color": OTHER},
                name="direct = patched",
                hoverinfo="skip",
            ),
            go.Scatter(
                x=share.ravel(),
                y=restored.ravel(),
                mode="markers",
                text=names,
                customdata=[[layer, head] for layer in range(L) for head in range(H)],
                marker={
                    "color": np.repeat(np.arange(L), H),
                    "colorscale": "Viridis",
                    "size": 9,
                    "colorbar": {"title": "layer"},
                },
                hovertemplate="%{text}<br>direct %{x:.2f} · patched %{y:.2f}<extra></extra>",
                name="heads",
            ),
        ]
    )
    fig.update_layout(
        # A short head over short lines: in one line it ran past a phone's chart.
        title="Direct effect vs patching<br><sup>on the diagonal a head writes the answer itself;<br>"
        "high and left of it, it matters through later layers</sup>",
        height=480,
        margin={**_MARGIN, "t": 100},
        showlegend=False,
        xaxis={"title": "direct logit attribution (share of the clean difference)", "range": [-lim, lim]},
        yaxis={"title": "patching (share of the difference restored)", "range": [-lim, lim]},
    )
    return fig


def _scale(baseline: float, values: np.ndarray) -> dict:
    """From 0 (blue) through white at the random baseline to the largest score (red)."""
    top = float(np.nanmax(values)) if np.isfinite(values).any() else 0.0
    top = max(top, 2 * baseline, 1e-9)
    white = min(max(baseline / top, 0.0), 1.0)
    return {"colorscale": [[0, "#2166ac"], [white, "#f7f7f7"], [1, "#b2182b"]], "zmin": 0, "zmax": top}


def composition_map(row: np.ndarray, baseline: float, title: str, layers: range | None = None) -> go.Figure:
    """One head's composition with every other head, `row (L, H)`; only `layers` drawn (default all),
    blank where no pair exists."""
    L, H = row.shape
    layers = range(L) if layers is None else layers
    fig = go.Figure(
        go.Heatmap(
            z=row[list(layers)],
            x=[f"H{h}" for h in range(H)],
            y=[f"L{layer}" for layer in layers],
            hovertemplate="layer %{y}, head %{x}: %{z:.3f}<extra></extra>",
            colorbar={"title": f"score<br>(baseline {baseline:.3f})"},
            **_scale(baseline, row),
        )
    )
    fig.update_layout(
        title=title,
        height=max(300, 22 * len(layers) + 150),
        margin=_MARGIN,
        xaxis={"title": "head"},
        yaxis={"title": "layer", "autorange": "reversed"},
    )
    return fig


def composition_bars(row: np.ndarray, baseline: float, title: str, n: int = 15) -> go.Figure:
    """The `n` highest scores of `row (L, H)`, ranked, with the random baseline as a dashed line."""
    H = row.shape[1]
    flat = np.nan_to_num(row, nan=-np.inf).ravel()
    order = [i for i in np.argsort(-flat, kind="stable")[:n] if np.isfinite(flat[i])]
    fig = go.Figure(
        go.Bar(
            x=[formats.head(i // H, i % H) for i in order],
            y=[float(flat[i]) for i in order],
            marker_color=["#d62728" if flat[i] > baseline else OTHER for i in order],
            hovertemplate="%{x}: %{y:.3f}<extra></extra>",
        )
    )
    # The baseline is a dashed line named in the legend: a label on the line sat over the bars beside it.
    fig.add_hline(y=baseline, line_dash="dash", line_color=OTHER)
    fig.add_trace(
        go.Scatter(
            x=[None], y=[None], mode="lines", line={"dash": "dash", "color": OTHER},
            name=f"random matrices: {baseline:.3f}",
        )
    )  # fmt: skip
    fig.update_traces(selector={"type": "bar"}, name="score (red: above random)")
    fig.update_layout(
        title=title, height=380, margin=_MARGIN, xaxis={"title": "head"}, yaxis={"title": "composition score"},
        showlegend=True, legend={"orientation": "h", "y": -0.3},
    )  # fmt: skip
    return fig


def composition_matrix(scores: np.ndarray, baseline: float, kind: str) -> go.Figure:
    """Every pair: later heads as rows, earlier heads as columns (`scores (L, H, L, H)`)."""
    L, H = scores.shape[:2]
    names = [formats.head(layer, head) for layer in range(L) for head in range(H)]
    grid = scores.reshape(L * H, L * H)
    fig = go.Figure(
        go.Heatmap(
            z=grid,
            x=names,
            y=names,
            hovertemplate="later %{y} reads earlier %{x}: %{z:.3f}<extra></extra>",
            colorbar={"title": f"{kind.upper()}-comp.<br>(baseline {baseline:.3f})"},
            **_scale(baseline, grid),
        )
    )
    fig.update_layout(
        title=f"{kind.upper()}-composition of every pair of heads (red: above the random baseline)",
        height=max(420, min(900, 4 * L * H + 200)),
        margin=_MARGIN,
        xaxis={"title": "earlier head (writes)", "showticklabels": L * H <= 64},
        yaxis={"title": "later head (reads)", "autorange": "reversed", "showticklabels": L * H <= 64},
    )
    return fig


NAMED_SYMBOLS = ("circle", "square", "diamond", "triangle-up", "star", "x", "cross", "triangle-down")


def agreement_scatter(exact: np.ndarray, estimate: np.ndarray, worst: list[tuple[int, int]]) -> go.Figure:
    """Each head as a point: exact patching (x) against attribution patching's estimate (y), on
    equal axes with the diagonal where they agree; the `worst` heads (layer, head) in red, each its
    own trace with its own symbol, named in the legend."""
    L, H = exact.shape
    names = [formats.head(layer, head) for layer in range(L) for head in range(H)]
    both = np.concatenate([exact.ravel(), estimate.ravel()])
    low, high = float(np.nanmin(both)), float(np.nanmax(both))
    pad = max(high - low, 0.05) * 0.08
    lim = [min(low, 0.0) - pad, max(high, 0.0) + pad]
    # The heads that disagree most, each its own legend entry with its own symbol: names written beside
    # the points ran into each other and into the points wherever two heads sat close (issue 33's walk).
    fig = go.Figure(
        [
            go.Scatter(
                x=lim, y=lim, mode="lines", line={"dash": "dot", "color": OTHER}, name="estimate = exact",
                hoverinfo="skip",
            ),
            go.Scatter(
                x=exact.ravel(), y=estimate.ravel(), mode="markers", text=names, name="heads",
                customdata=[[layer, head] for layer in range(L) for head in range(H)],
                marker={"color": ATTENTION, "size": 8, "opacity": 0.7},
                hovertemplate="%{text}<br>exact %{x:.3f} · estimate %{y:.3f}<extra></extra>",
            ),
            *(
                go.Scatter(
                    x=[exact[layer, head]], y=[estimate[layer, head]], mode="markers",
                    name=formats.head(layer, head), legendgroup="disagree", legendgrouptitle_text="disagree most:",
                    marker={"color": "#d62728", "size": 12, "symbol": NAMED_SYMBOLS[i % len(NAMED_SYMBOLS)],
                            "line": {"width": 1, "color": "white"}},
                    hovertemplate=f"{formats.head(layer, head)}<br>exact %{{x:.3f}} · estimate %{{y:.3f}}<extra></extra>",
                )
                for i, (layer, head) in enumerate(worst)
            ),
        ]
    )  # fmt: skip
    fig.update_layout(
        title="Exact vs attribution patching<br><sup>a point per head; on the dotted line they agree</sup>",
        height=620,
        # The legend (up to 5 named heads, one a row) at the figure's foot: placed under the plot in paper
        # units it rose into the axis's title as its own height shrank the plot.
        margin={**_MARGIN, "t": 80, "b": 220},
        legend={"orientation": "h", "yref": "container", "y": 0, "yanchor": "bottom"},
        # Equal scales, kept by shrinking the wider axis's length ("domain"), not by widening its range:
        # plotly's default ("range") stretched a wide chart's x axis to −1.5…2 for heads in −0.3…0.6.
        xaxis={
            "title": "exact: share restored by patching the head",
            "range": lim,
            "zeroline": True,
            "constrain": "domain",
        },
        yaxis={
            "title": "attribution patching's estimate",
            "range": lim,
            "zeroline": True,
            "scaleanchor": "x",
            "scaleratio": 1,
            "constrain": "domain",
        },
    )
    return fig


def edited_row(before: np.ndarray, after: np.ndarray, keys: list[str], title: str) -> go.Figure:
    """One attention row before and after the edit: a bar per key, side by side."""
    fig = go.Figure(
        [
            go.Bar(x=keys, y=before, name="the model's row", marker_color=OTHER,
                   hovertemplate="%{x}: %{y:.3f}<extra>before</extra>"),
            go.Bar(x=keys, y=after, name="edited row", marker_color="#d62728",
                   hovertemplate="%{x}: %{y:.3f}<extra>edited</extra>"),
        ]
    )  # fmt: skip
    fig.update_layout(
        title=title,
        barmode="group",
        height=340,
        margin=_MARGIN,
        legend={"orientation": "h", "y": -0.35},
        xaxis={"title": "key", "type": "category", "tickangle": -45},
        yaxis={"title": "attention weight", "range": [0, 1.05]},
    )
    return fig


def next_token_change(tokens: list[str], before: np.ndarray, after: np.ndarray, title: str) -> go.Figure:
    """Next-token probabilities before and after an edit, for the tokens listed (horizontal bars)."""
    fig = go.Figure(
        [
            go.Bar(y=tokens, x=before, orientation="h", name="before", marker_color=OTHER,
                   hovertemplate="%{y}: %{x:.2%}<extra>before</extra>"),
            go.Bar(y=tokens, x=after, orientation="h", name="after the edit", marker_color="#d62728",
                   hovertemplate="%{y}: %{x:.2%}<extra>after</extra>"),
        ]
    )  # fmt: skip
    fig.update_layout(
        title=title,
        barmode="group",
        height=max(300, 34 * len(tokens) + 130),
        margin=_MARGIN,
        legend={"orientation": "h", "y": -0.15},
        xaxis={"title": "probability", "tickformat": ".0%", "rangemode": "tozero"},
        yaxis={"type": "category", "autorange": "reversed"},
    )
    return fig
