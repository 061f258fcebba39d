"""Figures only the Speech page draws: NumPy in, `go.Figure` out (no Streamlit)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

MEL_SECONDS, POSITION_SECONDS = 0.01, 0.02  # a mel frame, an encoder position


def spectrogram(mel: np.ndarray, title: str) -> go.Figure:
    """`mel (80, N)`: log-mel bands over time (seconds on x)."""
    x = np.arange(mel.shape[1]) * MEL_SECONDS
    fig = go.Figure(go.Heatmap(z=mel, x=x, colorscale="Magma", colorbar={"title": "log-mel"}))
    fig.update_layout(
        title=title, xaxis_title="time (s)", yaxis_title="mel band", height=260, margin={"t": 40}
    )
    return fig


def cross_attention(
    rows: np.ndarray, labels: list[str], spans: list[tuple[float, float]], title: str
) -> go.Figure:
    """`rows (n, P)`: each text token's attention over the clip's audio positions (20 ms each),
    time on x as under the spectrogram; each token's timed span outlined."""
    x = np.arange(rows.shape[1]) * POSITION_SECONDS
    fig = go.Figure(go.Heatmap(z=rows, x=x, y=labels, colorscale="Viridis", colorbar={"title": "weight"}))
    for i, (start, end) in enumerate(spans):
        fig.add_shape(type="rect", x0=start, x1=max(end, start + POSITION_SECONDS), y0=i - 0.5, y1=i + 0.5,
                      line={"color": "white", "width": 1})  # fmt: skip
    fig.update_layout(
        title=title, xaxis_title="time (s)", yaxis={"autorange": "reversed", "title": "token"},
        height=max(260, 22 * len(labels) + 100), margin={"t": 40},
    )  # fmt: skip
    return fig


def alignment_grid(
    layers: int, heads: int, marked: tuple[tuple[int, int], ...], chosen: tuple[int, int] | None
) -> go.Figure:
    """A layer × head grid: the alignment heads filled, the chosen head outlined."""
    z = np.zeros((layers, heads))
    for layer, head in marked:
        z[layer, head] = 1
    fig = go.Figure(go.Heatmap(z=z, x=list(range(heads)), y=list(range(layers)), zmin=0, zmax=1, showscale=False,
                               colorscale=[[0, "#eeeeee"], [1, "#1f77b4"]],
                               hovertemplate="layer %{y}, head %{x}<extra></extra>"))  # fmt: skip
    if chosen is not None:
        layer, head = chosen
        fig.add_shape(type="rect", x0=head - 0.5, x1=head + 0.5, y0=layer - 0.5, y1=layer + 0.5,
                      line={"color": "orange", "width": 3})  # fmt: skip
    fig.update_layout(
        title="Alignment heads (blue): the cross-attention heads that track time",
        xaxis_title="head", yaxis={"title": "layer", "autorange": "reversed", "dtick": 1},
        xaxis={"dtick": 1}, height=240, margin={"t": 40},
    )  # fmt: skip
    return fig


def encoder_attention(weights: np.ndarray, title: str) -> go.Figure:
    """`weights (P, P)`: the encoder's self-attention over time (query time on y, key time on x)."""
    t = np.arange(weights.shape[0]) * POSITION_SECONDS
    fig = go.Figure(go.Heatmap(z=weights, x=t, y=t, colorscale="Viridis", colorbar={"title": "weight"}))
    fig.update_layout(title=title, xaxis_title="key time (s)", yaxis={"title": "query time (s)", "autorange": "reversed"},
                      height=420, margin={"t": 40})  # fmt: skip
    return fig
