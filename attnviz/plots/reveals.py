"""The modern-attention and circuits lessons' figures: what a step shows with its question and with its answer.

NumPy in (an `Exercise`'s `data`), plotly figures out; no Streamlit, no framework. Where the app
already draws the thing, its builder is reused (the head grid, the K/V sharing diagram, the tile
grid, the logit lens, the role scan, the ablation bars, the patching map), so a reveal looks like the
page its "Open this" link leads to.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from attnviz import formats
from attnviz.kernels import replay
from attnviz.plots import heatmaps, interp, rope, tiles
from attnviz.plots.labels import kv_group_titles

SMALL = {"margin": {"l": 60, "r": 20, "t": 60, "b": 60}, "height": 360}


def kv_group(data: dict) -> go.Figure:
    """The query heads of one K/V group in one layer (`weights (r, T, T)`), titled with the K/V head
    they read, as the explorer groups its panels."""
    titles = kv_group_titles(data["n_heads"], data["n_kv_heads"])
    tokens = list(data["tokens"])
    return heatmaps.head_grid(
        data["weights"],
        tokens,
        tokens,
        title=f"Layer {data['layer']}: the query heads that read K/V head {data['group']}",
        panel_titles=[titles[h] for h in data["heads"]],
    )


def kv_growth(lengths: np.ndarray, curves: dict[str, np.ndarray], marked: int) -> go.Figure:
    """KV-cache bytes against the tokens cached, one line per layout; `marked` tokens ringed."""
    fig = go.Figure()
    for label, values in curves.items():
        values = np.asarray(values, np.float64)
        fig.add_trace(go.Scatter(x=lengths, y=values / 2**20, mode="lines", name=label,
                                 hovertemplate="%{x:,} tokens: %{y:.1f} MiB<extra>" + label + "</extra>"))  # fmt: skip
        at = float(np.interp(marked, lengths, values))
        fig.add_trace(go.Scatter(x=[marked], y=[at / 2**20], mode="markers+text", text=[formats.size(at)],
                                 textposition="top left", marker={"size": 10, "symbol": "circle-open"},
                                 showlegend=False, hoverinfo="skip"))  # fmt: skip
    fig.add_vline(x=marked, line_dash="dot", line_color="#7f7f7f")
    fig.update_layout(
        title="KV-cache size as the text grows",
        xaxis_title="tokens cached",
        yaxis_title="MiB",
        yaxis_rangemode="tozero",
        legend={"orientation": "h", "y": -0.25},
        **SMALL,
    )
    return fig


def kv_cache(data: dict) -> list[go.Figure]:
    figs = [kv_growth(data["lengths"], data["curves"], data["length"])]
    if data.get("per_token"):
        figs.insert(0, rope.kv_cache_bars({data["model"]: data["per_token"]}, log=False))
    return figs


def window(data: dict) -> list[go.Figure]:
    """The run's weights under the window (blocked cells as every page draws them) and who can have
    heard of whom after the stacked layers."""
    labels = [str(i) for i in range(len(data["weights"]))]
    weights = heatmaps.matrix(
        data["weights"], labels, labels, blocked=~data["visible"], diverging=False, colorscale="Blues",
        value_name="weight", title=f"One layer, window {data['window']}: query {data['query']}'s row",
        x_title="key", y_title="query",
    )  # fmt: skip
    heard = heatmaps.binary_mask(
        data["reach"], labels, labels, attend=True, title=f"After {data['layers']} layers: reached (True)"
    )
    return [weights, heard]


def rope_offsets(along: np.ndarray, apart: np.ndarray, gap: int) -> go.Figure:
    """q·k of the same q and k turned at several positions: at a fixed offset, against where the pair
    starts (flat), and from a fixed key, against the offset (it moves)."""
    x = np.arange(len(along))
    fig = go.Figure(
        [
            go.Scatter(x=x, y=along, mode="lines+markers", name=f"offset {gap}, moved along the text"),
            go.Scatter(x=x, y=apart, mode="lines+markers", name="key fixed, offset 0, 1, 2, …",
                       line={"dash": "dot"}),
        ]
    )  # fmt: skip
    fig.update_layout(
        title="q·k of the same q and k, turned at other positions",
        xaxis_title="start position (solid) or offset (dotted)",
        yaxis_title="q·k",
        legend={"orientation": "h", "y": -0.25},
        **SMALL,
    )
    return fig


def tile_grids(data: dict) -> list[go.Figure]:
    """The pass's grid at its last tile, without and with the causal mask (`attnviz.plots.tiles`)."""
    figs = []
    for causal, run in data["runs"].items():
        last = run.tiles[-1]
        done = sum(not t.skipped for t in run.tiles)
        title = f"{'Causal' if causal else 'No mask'}: {done} of {len(run.tiles)} tiles computed"
        figs.append(tiles.tile_grid(replay.status(run, len(run.tiles) - 1), None, last.queries, last.keys,
                                    list(data["tokens"]), title))  # fmt: skip
    return figs


def lens_rank(ranks: np.ndarray, word: str, top: int = 5) -> go.Figure:
    """The answer's rank in the lens after each layer (1 = the top token), the top-`top` band shaded."""
    rows = ["embeddings", *[f"after L{i}" for i in range(len(ranks) - 1)]]
    fig = go.Figure(
        go.Scatter(x=rows, y=np.asarray(ranks) + 1, mode="lines+markers", name=f"rank of “{word}”",
                   hovertemplate="%{x}: rank %{y:,}<extra></extra>")
    )  # fmt: skip
    fig.add_hrect(y0=0.5, y1=top + 0.5, fillcolor="#2ca02c", opacity=0.15, line_width=0)
    fig.update_layout(
        title=f"“{word}” in the lens: its rank after each layer (shaded: the top {top})",
        yaxis={"title": "rank (log)", "type": "log", "autorange": "reversed"},
        xaxis={"title": "residual stream", "tickangle": -45},
        showlegend=False,
        **SMALL,
    )
    return fig


def induction_panels(data: dict) -> go.Figure:
    """The four heads on the repeated sequence, titled by their names (the question's figure)."""
    tokens = list(data["tokens"])
    return heatmaps.head_grid(data["panels"], tokens, tokens, cols=2, panel_titles=list(data["names"]))


def attribution_scatter(
    exact: np.ndarray, estimate: np.ndarray, layers, highlight: tuple[int, int]
) -> go.Figure:
    """Each swept head as a point, exact patching (x) against attribution's estimate (y); the diagonal
    is a perfect estimate, `highlight` (row in `layers`, head) ringed."""
    H = exact.shape[1]
    names = [formats.head(layer, h) for layer in layers for h in range(H)]
    lim = max(float(np.abs(np.concatenate([exact.ravel(), estimate.ravel()])).max()), 0.05) * 1.1
    i, h = highlight
    fig = go.Figure(
        [
            go.Scatter(x=[-lim, lim], y=[-lim, lim], mode="lines", line={"dash": "dot", "color": "#7f7f7f"},
                       name="estimate = exact", hoverinfo="skip"),
            go.Scatter(x=exact.ravel(), y=estimate.ravel(), mode="markers", text=names, name="heads",
                       marker={"size": 9, "color": np.repeat(np.asarray(layers), H), "colorscale": "Viridis",
                               "colorbar": {"title": "layer"}},
                       hovertemplate="%{text}<br>exact %{x:.2f} · estimate %{y:.2f}<extra></extra>"),
            go.Scatter(x=[exact[i, h]], y=[estimate[i, h]], mode="markers+text", text=[names[i * H + h]],
                       textposition="top center", name="the head asked about",
                       marker={"size": 18, "symbol": "circle-open", "color": "#d62728", "line": {"width": 2}}),
        ]
    )  # fmt: skip
    fig.update_layout(
        title="Attribution patching against exact patching, one point per head",
        xaxis={"title": "exact patching (share restored)", "range": [-lim, lim]},
        yaxis={"title": "attribution estimate", "range": [-lim, lim], "scaleanchor": "x"},
        legend={"orientation": "h", "y": -0.25},
        height=460,
        margin=SMALL["margin"],
    )
    return fig


def question(exercise_id: str, data: dict) -> list[go.Figure]:
    """The figures a step shows with its question (before the answer)."""
    return [induction_panels(data)] if exercise_id == "circuits.induction" else []


def reveal(exercise_id: str, data: dict) -> list[go.Figure]:
    """The figures of a step's reveal, by exercise id (`Exercise.id`) of the modern and circuits lessons."""
    draw = {
        "modern.kv_groups": lambda d: [rope.kv_sharing(d["n_heads"], d["n_kv_heads"]), kv_group(d)],
        "modern.kv_cache": kv_cache,
        "modern.gemma_cache": kv_cache,
        "modern.window": window,
        "modern.rope": lambda d: [
            rope_offsets(d["along"], d["apart"], d["gap"]),
            rope.pair_rotation(d["q"], d["q_turned"], d["position"]),
        ],
        "modern.tiles": tile_grids,
        "modern.lens": lambda d: [
            interp.lens_grid(d["probs"], d["labels"], list(d["tokens"])),
            lens_rank(d["ranks"], d["word"]),
        ],
        "circuits.induction": lambda d: [interp.role_heatmaps(d["scores"]), induction_panels(d)],
        "circuits.ablation": lambda d: [interp.ablation_bars(d["baseline"], d["top"], d["random"], 1)],
        "circuits.patching": lambda d: [interp.patching_heatmap(d["restored"])],
        "circuits.attribution": lambda d: [
            attribution_scatter(d["exact"], d["estimate"], d["layers"], d["highlight"])
        ],
    }
    return draw[exercise_id](data)
