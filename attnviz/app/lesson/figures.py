"""The lesson's figures: what a step shows before the answer (the question) and with it (the reveal).

NumPy in (an `Exercise`'s `data`), plotly figures out; built from the app's own
heatmaps and head view so the reveal looks like the page "Open this" leads to.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from attnviz.app.speech.figures import sound_spans
from attnviz.plots import colorbar, heatmaps, reveals, tokens

PANELS = ("A", "B", "C", "D")
SMALL = {"margin": {"l": 10, "r": 10, "t": 50, "b": 10}, "height": 320}  # fits a phone's width and height


SQUARE_PX = 64  # a cell of a small matrix: square, and three fit a phone
NAME_PX = 50  # room right of the colour bar for its name ("value", "allowed")
LABELS_PX = 30  # what the row labels may add to the left margin (the plot area starts there)


def _square(fig: go.Figure, rows: int, cols: int) -> go.Figure:
    """A small matrix at a fixed size with square cells (a 3 × 3 is 212 px × 366 px), its colour bar
    and the bar's name inside the figure: the app's bar is 220 px long, which a 3-column figure cut
    off after 0 (issue 33: cells reached 1.46, the bar showed −1 … 0). Here the bar is as long as the
    figure leaves room for beside its name, once the row labels have taken their margin."""
    margin = fig.layout.margin
    left, right = margin.l or 60, margin.r or 20
    top, bottom = margin.t or 80, margin.b or 60
    width = left + right + SQUARE_PX * cols
    fig.update_layout(width=width, height=top + bottom + SQUARE_PX * rows)
    length = min(colorbar.BAR_PX, width - left - LABELS_PX - NAME_PX)
    fig.update_traces(selector={"type": "heatmap"}, colorbar={"len": length})
    fig.update_annotations(selector={"name": colorbar.BAR_NAME}, xshift=length + colorbar.NAME_GAP_PX)
    return fig


def scores(data: dict) -> go.Figure:
    fig = heatmaps.matrix(data["scores"], data["q_labels"], data["k_labels"], title="QKᵀ", show_values=True)
    return _square(fig, *np.shape(data["scores"]))


def _bars(rows: dict[str, np.ndarray], labels, title: str, y_title: str) -> go.Figure:
    fig = go.Figure([go.Bar(name=name, x=list(labels), y=np.asarray(v, float)) for name, v in rows.items()])
    fig.update_layout(
        title=title,
        barmode="group",
        yaxis_title=y_title,
        legend={"orientation": "h", "y": -0.2},
        dragmode=False,
        **SMALL,
    )
    return fig


def scaling(data: dict) -> go.Figure:
    fig = _bars(data["rows"], data["k_labels"], "One query's weights, side by side", "weight")
    fig.update_yaxes(range=[0, 1])
    return fig


def softmax(data: dict) -> go.Figure:
    rows = {"score": data["scores"], "softmax weight": data["weights"]}
    return _bars(rows, data["k_labels"], f"{data['query']}: scores and their softmax", "")


def mask_pair(data: dict) -> tuple[go.Figure, go.Figure]:
    """Where each query may attend: as the causal mask means it, and as Keras applies it when the mask
    was written 1 = blocked (both drawn True = may attend, so the two pictures compare)."""
    q, k = data["q_labels"], data["k_labels"]
    figs = (
        heatmaps.binary_mask(data["allowed"], q, k, title="Meant (causal)", attend=True),
        heatmaps.binary_mask(data["applied"], q, k, title="What Keras attends to", attend=True),
    )
    return tuple(_square(f, *np.shape(data["allowed"])) for f in figs)


def head_panels(data: dict, revealed: bool) -> go.Figure:
    """The four heads as panels A–D; with the reveal, each panel's pattern in its title."""
    labels = list(data["labels"])
    fig = heatmaps.head_grid(data["panels"], labels, labels, cols=2)
    names = [
        f"{p}: {pattern}" if revealed else p for p, pattern in zip(PANELS, data["patterns"], strict=True)
    ]
    for annotation, name in zip(fig.layout.annotations, names, strict=False):
        annotation.text = name
    return fig


def positions(data: dict) -> go.Figure:
    """q·k of a pair at a fixed distance, against where the pair starts: RoPE vs added sinusoids."""
    start = np.arange(len(data["rope"]))
    fig = go.Figure(
        [
            go.Scatter(x=start, y=data["rope"], name="RoPE (turned)", mode="lines+markers"),
            go.Scatter(
                x=start, y=data["added"], name="sinusoids added", mode="lines+markers", line={"dash": "dot"}
            ),
        ]
    )
    fig.update_layout(
        title=f"q·k of a pair {data['gap']} apart, by where it starts",
        xaxis_title="position of the query",
        yaxis_title="q·k",
        legend={"orientation": "h", "y": -0.25},
        dragmode=False,
        **SMALL,
    )
    return fig


def learned_head(data: dict) -> go.Figure:
    return tokens.head_view(data["attn"], data["tokens"], [data["head"]], focus=data["focus"])


def shapes(data: dict) -> go.Figure:
    """The shape of each step the reference recorded, as a table."""
    names, shapes_ = list(data["ledger"]), [str(s) for s in data["ledger"].values()]
    fig = go.Figure(go.Table(header={"values": ["step", "shape"]}, cells={"values": [names, shapes_]}))
    fig.update_layout(margin={"l": 10, "r": 10, "t": 10, "b": 10}, height=40 + 30 * len(names))
    return fig


def question(ex) -> list[go.Figure]:
    """The figures an exercise (`attnviz.lessons.Exercise`) shows with its question, before the answer."""
    if ex.lesson == "basics":
        return [head_panels(ex.data, revealed=False)] if ex.key == "heads" else []
    if ex.lesson == "speech":  # the Speech page's spectrogram, its colours and axes
        return [sound_spans(ex.data["mel"], ex.data["spans"], word=ex.data["word"])]
    return reveals.question(ex.id, ex.data)


def reveal_figures(ex) -> list[go.Figure]:
    """The figures of an exercise's reveal, for any lesson."""
    if ex.lesson == "speech":
        d = ex.data
        return [sound_spans(d["mel"], d["spans"], row=d["row"], key=d["answer"], word=d["word"])]
    return reveal(ex.key, ex.data) if ex.lesson == "basics" else reveals.reveal(ex.id, ex.data)


def reveal(key: str, data: dict) -> list[go.Figure]:
    """The figures of a basics step's reveal (`key` as in `attnviz.lessons.STEPS`)."""
    if key == "masks":
        return list(mask_pair(data))
    if key == "heads":
        return [head_panels(data, revealed=True)]
    draw = {
        "scores": scores,
        "scaling": scaling,
        "softmax": softmax,
        "shapes": shapes,
        "positions": positions,
        "learned": learned_head,
    }
    return [draw[key](data)]
