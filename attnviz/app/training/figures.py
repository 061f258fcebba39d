"""Figures of a training run: numpy in, plotly Figure out, no framework, no Streamlit.

The attention heatmaps are `attnviz.plots.heatmaps.head_grid`'s, made for a projector (`heads`).
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from attnviz.frameworks import label
from attnviz.plots.heatmaps import head_grid
from attnviz.plots.labels import axis_ticks
from attnviz.training import SCORES, TrainingRun

HEAD_LABELS = (
    12  # labelled positions per axis of a head's map at most: every k-th above (readable from the back)
)
MAX_POINTS = 2000  # points per drawn curve; longer histories are thinned evenly
DASHES = ("solid", "dash")
SCORE_TITLES = {
    "mirror": "mirror",
    "previous_token": "previous token",
    "induction": "induction",
    "diagonal": "self",
    "entropy": "entropy (nats)",
}


def _thin(values: list[dict], key: str) -> tuple[np.ndarray, np.ndarray]:
    stride = max(1, -(-len(values) // MAX_POINTS))
    picked = values[::stride]
    if values and picked[-1] is not values[-1]:
        picked.append(values[-1])
    return np.array([v["step"] for v in picked]), np.array([v[key] for v in picked], dtype=float)


def _marker(fig: go.Figure, step: int | None, cols: int) -> None:
    """A dotted red line at `step` across each of the `cols` panels of row 1, written as shapes in one
    update (`add_vline(row=, col=)` looks every panel up again, per line)."""
    if step is not None:
        line = {"color": "#d62728", "width": 2, "dash": "dot"}
        fig.update_layout(
            shapes=[
                {"type": "line", "x0": step, "x1": step, "y0": 0, "y1": 1, "xref": f"x{col if col > 1 else ''}",
                 "yref": f"y{col if col > 1 else ''} domain", "line": line}
                for col in range(1, cols + 1)
            ]
        )  # fmt: skip


def curves(runs: dict[str, TrainingRun], *, marker: int | None = None) -> go.Figure:
    """Loss (left) and accuracy (right) against the step, one style per run.

    Accuracy: the training batch's (line) and the held-out set's at each snapshot
    (dots). `marker` draws a vertical line at that step (the timeline's position).
    """
    fig = make_subplots(rows=1, cols=2, subplot_titles=["loss (cross-entropy, nats)", "token accuracy"])
    for i, (name, run) in enumerate(runs.items()):
        dash = DASHES[i % len(DASHES)]
        history = list(run.history)
        steps, loss = _thin(history, "loss")
        fig.add_scatter(
            x=steps, y=loss, name=f"{name}: loss", line={"dash": dash, "color": "#1f77b4"}, row=1, col=1
        )
        steps, acc = _thin(history, "accuracy")
        fig.add_scatter(
            x=steps,
            y=acc,
            name=f"{name}: batch accuracy",
            line={"dash": dash, "color": "#2ca02c"},
            row=1,
            col=2,
        )
        scores = list(run.scores)
        fig.add_scatter(
            x=[s["step"] for s in scores],
            y=[s["held_out_accuracy"] for s in scores],
            name=f"{name}: held-out accuracy",
            mode="markers+lines",
            line={"dash": dash, "color": "#ff7f0e", "width": 1},
            marker={"size": 5},
            row=1,
            col=2,
        )
    _marker(fig, marker, 2)
    fig.update_xaxes(title_text="step")
    fig.update_yaxes(range=[0, 1.02], row=1, col=2)
    fig.update_layout(
        height=330, margin={"l": 40, "r": 20, "t": 40, "b": 40}, legend={"orientation": "h", "y": -0.25}
    )
    return fig


def score_lines(run: TrainingRun, names=("mirror", "previous_token", "induction", "entropy"), *, marker=None):
    """Each score per head (one line per layer·head) against the step, one panel per score."""
    scores = list(run.scores)
    fig = make_subplots(rows=1, cols=len(names), subplot_titles=[SCORE_TITLES[n] for n in names])
    steps = [s["step"] for s in scores]
    L, H = run.config.n_layers, run.config.n_heads
    palette = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
    traces, cols = [], []
    for col, name in enumerate(names, start=1):
        series = np.stack([s[name] for s in scores]) if scores else np.zeros((0, L, H))
        for layer in range(L):
            for head in range(H):
                traces.append(
                    go.Scatter(
                        x=steps,
                        y=series[:, layer, head],
                        name=f"layer {layer} head {head}",
                        legendgroup=f"{layer}.{head}",
                        showlegend=col == 1,
                        line={
                            "color": palette[head % len(palette)],
                            "dash": DASHES[layer % 2] if L <= 2 else None,
                        },
                        hovertemplate=f"L{layer} H{head}<br>step %{{x}}<br>{name} %{{y:.3f}}<extra></extra>",
                    )
                )
                cols.append(col)
    # One call: each add_scatter(row=, col=) looks the panel up again (most of this figure's time).
    fig.add_traces(traces, rows=[1] * len(traces), cols=cols)
    for col, name in enumerate(names, start=1):
        if name != "entropy":
            fig.update_yaxes(range=[0, 1.02], row=1, col=col)
    _marker(fig, marker, len(names))
    fig.update_xaxes(title_text="step")
    fig.update_layout(
        height=300, margin={"l": 40, "r": 20, "t": 40, "b": 40}, legend={"orientation": "h", "y": -0.3}
    )
    return fig


def token_labels(tokens) -> list[str]:
    """Unique axis labels `position:token` (a token may occur twice)."""
    return [f"{i}:{t}" for i, t in enumerate(tokens)]


def score_table(scores: dict, names=tuple(SCORES)) -> list[dict]:
    """Rows `layer, head, <score>…` for `st.dataframe`, rounded to 3 places."""
    L, H = np.shape(scores["mirror"])
    return [
        {
            "layer": layer,
            "head": head,
            **{SCORE_TITLES[n]: round(float(scores[n][layer, head]), 3) for n in names},
        }
        for layer in range(L)
        for head in range(H)
    ]


def attention_over_time(run: TrainingRun, indices: list[int], *, colorscale: str = "Blues") -> go.Figure:
    """The probe's attention for every layer·head (rows) at the snapshots `indices` (columns)."""
    L, H = run.config.n_layers, run.config.n_heads
    tokens = token_labels(run.probe[0])
    steps = [run.snapshots[i][0] for i in indices]
    titles = [f"L{layer} H{head} · step {s}" for layer in range(L) for head in range(H) for s in steps]
    fig = make_subplots(
        rows=L * H, cols=len(indices), subplot_titles=titles, horizontal_spacing=0.04, vertical_spacing=0.08
    )
    for row, (layer, head) in enumerate(((layer, head) for layer in range(L) for head in range(H)), start=1):
        for col, i in enumerate(indices, start=1):
            fig.add_heatmap(
                z=run.snapshots[i][1][layer, head],
                x=tokens,
                y=tokens,
                coloraxis="coloraxis",
                row=row,
                col=col,
            )
    fig.update_yaxes(autorange="reversed", type="category", tickfont={"size": 8})
    fig.update_xaxes(type="category", tickfont={"size": 8}, tickangle=-90)
    fig.update_layout(
        coloraxis={"colorscale": colorscale, "cmin": 0, "cmax": 1, "colorbar": {"title": {"text": "weight"}}},
        height=80 + 260 * L * H,
        width=260 * len(indices) + 120,
        margin={"l": 50, "r": 20, "t": 40, "b": 40},
    )
    return fig


def heads(attention: np.ndarray, probe, causal: bool) -> go.Figure:
    """One layer's heads on the probe: square cells, causally blocked cells in the app's grey ✕
    style, at most `HEAD_LABELS` labels per axis (every k-th, `meta["label_stride"]`).

    Args:
        attention: `(H, T, T)` weights on the probe.
        probe: the probe's `T` tokens (labels `position:token`).
        causal: the model's causal mask: keys after the query are blocked.
    """
    T = attention.shape[-1]
    names = token_labels(probe)
    blocked = np.triu(np.ones((T, T), bool), 1) if causal else None
    fig = head_grid(attention, names, names, blocked=blocked, title="")
    stride = -(-T // HEAD_LABELS)
    if stride > 1:
        ticks = axis_ticks(names[::stride], fig.layout.xaxis.tickfont.size)
        fig.update_xaxes(**ticks, tickangle=-90)
        fig.update_yaxes(**ticks)
    # Each panel's cells square, whatever the width; one update for every panel. The x axis follows its
    # y axis: the panels of a row share one query axis (`head_grid`); a scale anchor on a y axis that
    # matches another did not hold in Chromium (every panel but the row's first was drawn stretched).
    square = {}
    for n, _ in enumerate(fig.select_xaxes(), start=1):
        suffix = "" if n == 1 else str(n)
        square |= {f"xaxis{suffix}": {"scaleanchor": f"y{suffix}", "scaleratio": 1, "constrain": "domain"},
                   f"yaxis{suffix}": {"constrain": "domain"}}  # fmt: skip
    fig.update_layout(square)
    fig.layout.meta = {**fig.layout.meta, "label_stride": stride}
    return fig


def live_view(runs: dict) -> dict:
    """The charts drawn while a run trains: the curves and the latest snapshot's heatmaps (the scores'
    chart is the timeline's), keyed as in `view`."""
    return {"curves": curves({label(fw): r for fw, r in runs.items()}), **_heads(runs, None)}


def view(runs: dict, index: int | None, marker: int | None) -> dict:
    """Every chart of the view at snapshot `index` (None: the latest), keyed by where it goes."""
    out = {"curves": curves({label(fw): r for fw, r in runs.items()}, marker=marker), **_heads(runs, index)}
    for fw, run in runs.items():
        out[f"scores.{fw}"] = score_lines(run, marker=marker)
    return out


def _heads(runs: dict, index: int | None) -> dict:
    """`heads.<framework>.<layer>` → (step, that layer's heatmaps) at snapshot `index` (None: the latest)."""
    out = {}
    for fw, run in runs.items():
        done = len(run.scores)  # snapshots are appended before their scores
        step, attn = run.snapshots[done - 1 if index is None else index]
        for layer in range(attn.shape[0]):
            out[f"heads.{fw}.{layer}"] = (step, heads(attn[layer], run.probe[0], run.config.causal))
    return out
