"""The lesson's figures: what a step shows before the answer (the question) and with it (the reveal).

NumPy in (an `Exercise`'s `data`), plotly figures out; built from the app's own
heatmaps and head view so the reveal looks like the page "Open this" leads to.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from attnviz import masks
from attnviz.plots import heatmaps, tokens

PANELS = ("A", "B", "C", "D")
SMALL = {"margin": {"l": 10, "r": 10, "t": 50, "b": 10}, "height": 320}  # fits a phone's width and height


def scores(data: dict) -> go.Figure:
    return heatmaps.matrix(
        data["scores"], data["q_labels"], data["k_labels"], title="QKᵀ: row i = query i's scores", show_values=True
    )


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


def mask_pair(data: dict, built: str, passed: str) -> tuple[go.Figure, go.Figure]:
    """The causal mask as written (1 = blocked) and what an API reading 1 as "may attend" applies."""
    q, k = data["q_labels"], data["k_labels"]
    written = heatmaps.binary_mask(
        masks.to_convention(data["allowed"], built), q, k, title="Written: 1 = blocked", attend=0
    )
    read = heatmaps.binary_mask(data["applied"], q, k, title="Applied by Keras", attend=True)
    return written, read


def head_panels(data: dict, revealed: bool) -> go.Figure:
    """The four heads as panels A–D; with the reveal, each panel's pattern in its title."""
    labels = list(data["labels"])
    fig = heatmaps.head_grid(data["panels"], labels, labels, cols=2)
    names = [f"{p}: {pattern}" if revealed else p for p, pattern in zip(PANELS, data["patterns"], strict=True)]
    for annotation, name in zip(fig.layout.annotations, names, strict=False):
        annotation.text = name
    return fig


def positions(data: dict) -> go.Figure:
    """q·k of a pair at a fixed distance, against where the pair starts: RoPE vs added sinusoids."""
    start = np.arange(len(data["rope"]))
    fig = go.Figure(
        [
            go.Scatter(x=start, y=data["rope"], name="RoPE (turned)", mode="lines+markers"),
            go.Scatter(x=start, y=data["added"], name="sinusoids added", mode="lines+markers", line={"dash": "dot"}),
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


def reveal(key: str, data: dict, built: str = "", passed: str = "") -> list[go.Figure]:
    """The figures of a step's reveal (`key` as in `attnviz.lessons.STEPS`); the masks' pair needs the
    conventions the mask was written for and passed to."""
    if key == "masks":
        return list(mask_pair(data, built, passed))
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
