"""Figures only the Speech page draws: NumPy in, `go.Figure` out (no Streamlit)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.colors import convert_colors_to_same_type, make_colorscale, sequential

from attnviz.plots.labels import hung_title

MEL_SECONDS, POSITION_SECONDS = 0.01, 0.02  # a mel frame, an encoder position
# Whisper's log-mel is (log10 power + 4) / 4, floored 8 decades (80 dB) below the clip's loudest:
# one unit is 40 dB, and the scale's whole range is 2 units.
DB_PER_UNIT, FLOOR_UNITS = 40.0, 2.0
# Magma (dark = quiet, light = loud, as librosa draws spectrograms), its stops written as rgb(): Streamlit's
# plotly theme replaces the colours #000001 … #000020 anywhere in a figure with its own palette, and
# Magma's darkest stop is #000004, the theme's fourth categorical colour, a light pink — silence drew
# as the lightest colour of the figure, as if it were loud.
SOUND_SCALE = make_colorscale(convert_colors_to_same_type(sequential.Magma, "rgb")[0])


def sound_bar(top: float) -> dict:
    """The spectrogram's colour bar for a clip whose loudest value is `top`: log-mel values every 0.5
    (20 dB, as its title says) down to Whisper's floor, the ends named loud and silent (short labels:
    a phone's figure keeps its width for the sound)."""
    values = top - np.arange(0.0, FLOOR_UNITS + 1e-9, 0.5)
    words = ["loud", *[""] * (len(values) - 2), "silent"]
    return {"title": {"text": f"log-mel<br><sup>0.5 = {0.5 * DB_PER_UNIT:.0f} dB</sup>"}, "tickvals": values.tolist(),
            "ticktext": [f"{round(v, 2) + 0.0:.2f} {w}".strip() for v, w in zip(values, words, strict=True)]}  # fmt: skip


def spectrogram(mel: np.ndarray, title: str) -> go.Figure:
    """`mel (80, N)`: log-mel bands over time (seconds on x), silence dark, the loudest light, on
    Whisper's fixed 80 dB range below the clip's loudest value."""
    x = np.arange(mel.shape[1]) * MEL_SECONDS
    top = float(np.max(mel))
    fig = go.Figure(go.Heatmap(
        z=mel, x=x, colorscale=SOUND_SCALE, zmin=top - FLOOR_UNITS, zmax=top, colorbar=sound_bar(top),
        hovertemplate="%{x:.2f} s, mel band %{y}: log-mel %{z:.2f}<extra></extra>",
    ))  # fmt: skip
    title, top = hung_title(title)
    fig.update_layout(
        title=title, xaxis_title="time (s)", yaxis_title="mel band", height=220 + top, margin={"t": top}
    )
    return fig


def sound_spans(
    mel: np.ndarray,
    spans: list[tuple[float, float]],
    *,
    row: np.ndarray | None = None,
    key: int | None = None,
    word: str = "",
) -> go.Figure:
    """The spectrogram with spans A, B, … outlined (the lesson's question); with `row (P,)`, a word's
    cross-attention over the clip's audio positions drawn over it as a line, and span `key` (the
    model's timing of the word) drawn solid (the reveal)."""
    fig = spectrogram(
        mel,
        f"Where does “{word}” read the sound?"
        if row is None
        else f"The cross-attention of “{word}” over the sound",
    )
    for k, (start, end) in enumerate(spans):  # each span outlined, its letter above the plot
        solid = k == key
        fig.add_vrect(x0=start, x1=end, line={"color": "#00e5ff" if solid else "white", "width": 3 if solid else 2,
                      "dash": "solid" if solid else "dash"})  # fmt: skip
        fig.add_annotation(x=(start + end) / 2, y=1, yref="paper", yanchor="bottom", showarrow=False,
                           text=f"<b>{'ABCDEFGH'[k]}</b>", font={"size": 14})  # fmt: skip
    if row is not None:
        x = np.arange(len(row)) * POSITION_SECONDS
        fig.add_trace(go.Scatter(x=x, y=row, yaxis="y2", mode="lines", line={"color": "#00e5ff", "width": 2.5},
                                 name="attention weight", showlegend=False,
                                 hovertemplate="%{x:.2f} s: weight %{y:.3f}<extra></extra>"))  # fmt: skip
        fig.update_layout(yaxis2={"overlaying": "y", "side": "right", "range": [0, 1.1 * float(np.max(row))],
                                  "title": "weight", "showgrid": False, "nticks": 4,
                                  "tickformat": ".2f"})  # fmt: skip
        # the question's figure above keeps the colour bar; here the right side is the weight's axis
        fig.update_traces(selector={"type": "heatmap"}, showscale=False)
    top = fig.layout.margin.t + 24  # the spans' letters, under the title
    fig.update_layout(height=250 + top, margin={"t": top})
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
    title, top = hung_title(title)
    fig.update_layout(
        title=title, xaxis_title="time (s)", yaxis={"autorange": "reversed", "title": "token"},
        height=max(220, 22 * len(labels) + 60) + top, margin={"t": top},
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
    title, top = hung_title("Alignment heads (blue): the cross-attention heads that track time")
    fig.update_layout(
        title=title, xaxis_title="head", yaxis={"title": "layer", "autorange": "reversed", "dtick": 1},
        xaxis={"dtick": 1}, height=200 + top, margin={"t": top},
    )  # fmt: skip
    return fig


def encoder_attention(weights: np.ndarray, title: str) -> go.Figure:
    """`weights (P, P)`: the encoder's self-attention over time (query time on y, key time on x)."""
    t = np.arange(weights.shape[0]) * POSITION_SECONDS
    fig = go.Figure(go.Heatmap(z=weights, x=t, y=t, colorscale="Viridis", colorbar={"title": "weight"}))
    title, top = hung_title(title)
    fig.update_layout(title=title, xaxis_title="key time (s)", yaxis={"title": "query time (s)", "autorange": "reversed"},
                      height=380 + top, margin={"t": top})  # fmt: skip
    return fig
