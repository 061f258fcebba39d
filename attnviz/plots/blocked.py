"""The one look of a blocked (masked-out) cell: grey, marked ✕, and a legend entry that says so.

Every heatmap draws its blocked cells with `draw`: grey rectangles (SVG paths in
category-index coordinates, above the heatmap, so they scale with the cells when zoomed)
and a ✕ in each cell when the cells are large enough to show one.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from attnviz.plots.cells import block_mean

BLOCKED_COLOR = "#9e9e9e"
CROSS_COLOR = "#424242"
MIN_CROSS_PX = 14  # smaller cells are grey without a ✕
MAX_CROSSES = 4000  # per panel: beyond this the ✕ paths cost more than they show


def broadcast(blocked, shape: tuple[int, ...], block: tuple[int, int]) -> np.ndarray | None:
    """`blocked` broadcast to `shape` `(..., R, C)` of the plotted values (a block counts as
    blocked when all of it is), or None when nothing is blocked."""
    if blocked is None:
        return None
    mask = np.asarray(blocked, bool)
    if block != (1, 1):
        rows, cols = -(-mask.shape[-2] // block[0]), -(-mask.shape[-1] // block[1])
        mask = block_mean(mask.astype(float), rows, cols)[0] == 1
    mask = np.broadcast_to(mask, shape)
    return mask if mask.any() else None


def rectangles(blocked: np.ndarray) -> list[tuple[int, int, int, int]]:
    """Blocked cells of `(R, C)` as rectangles `(row0, row1, col0, col1)` (end-exclusive):
    runs along each row, merged down while the next row has the same run."""
    open_runs: dict[tuple[int, int], int] = {}
    done = []
    for i, row in enumerate(np.asarray(blocked, bool)):
        edges = np.flatnonzero(np.diff(np.r_[0, row.astype(np.int8), 0]))
        runs = set(zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True))
        for run in list(open_runs):
            if run not in runs:
                done.append((open_runs.pop(run), i, *run))
        for run in runs:
            open_runs.setdefault(run, i)
    done.extend((start, len(blocked), *run) for run, start in open_runs.items())
    return done


def shapes(blocked: np.ndarray, xref: str, yref: str, crosses: bool) -> list[dict]:
    """Grey rectangles over the blocked cells of one `(R, C)` panel, and a ✕ in each when `crosses`."""
    fill = "".join(
        f"M{c0 - 0.5},{r0 - 0.5}H{c1 - 0.5}V{r1 - 0.5}H{c0 - 0.5}Z" for r0, r1, c0, c1 in rectangles(blocked)
    )
    if not fill:
        return []
    out = [
        {"type": "path", "path": fill, "xref": xref, "yref": yref, "fillcolor": BLOCKED_COLOR,
         "line": {"width": 0}, "layer": "above"}
    ]  # fmt: skip
    if crosses:
        d = 0.22
        path = "".join(
            f"M{j - d},{i - d}L{j + d},{i + d}M{j - d},{i + d}L{j + d},{i - d}"
            for i, j in np.argwhere(blocked)
        )
        out.append(
            {"type": "path", "path": path, "xref": xref, "yref": yref, "layer": "above",
             "line": {"color": CROSS_COLOR, "width": 1.5}}
        )  # fmt: skip
    return out


def legend(name: str = "blocked (masked out)") -> go.Scatter:
    """A legend entry for the grey ✕ cells (the cells themselves are shapes)."""
    return go.Scatter(
        x=[None],
        y=[None],
        mode="markers",
        marker={
            "symbol": "square-x",
            "size": 14,
            "color": BLOCKED_COLOR,
            "line": {"color": CROSS_COLOR, "width": 1},
        },
        name=name,
        showlegend=True,
        hoverinfo="skip",
    )


def draw(fig: go.Figure, mask: np.ndarray, cell: int, *, name: str = "blocked (masked out)") -> None:
    """Grey ✕ cells over every panel of `fig` and one legend entry.

    Args:
        mask: bool `(P, R, C)`, one `(R, C)` per panel in the order of the figure's axes
            (panel p on axes `x{p+1}`, `y{p+1}`; the first is `x`, `y`).
        cell: the cell height in pixels: a ✕ is drawn from `MIN_CROSS_PX` up.
    """
    for p, panel in enumerate(mask):
        suffix = "" if p == 0 else str(p + 1)
        crosses = cell >= MIN_CROSS_PX and panel.shape[-1] <= 48 and panel.sum() <= MAX_CROSSES
        for shape in shapes(panel, f"x{suffix}", f"y{suffix}", crosses):
            fig.add_shape(shape)
    fig.add_trace(legend(name))
