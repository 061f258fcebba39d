"""Heatmap cells: how many a figure holds, how tall they are, and what sets the colour scale.

- the height grows with the number of rows (`cell_px` pixels per row);
- above `MAX_CELLS_PER_FIGURE` cells, maps are block-averaged (`fit`);
- the colour scale of attention weights is not set by a trivially certain row
  (a row with one allowed key holds a single weight 1): see `weight_scale`;
- a block-averaged map keeps its labels readable ('first–last', `block_labels`).
"""

from __future__ import annotations

import math

import numpy as np

from attnviz.plots.labels import LABEL_LIMIT, positions, safe_labels

MAX_CELLS_PER_FIGURE = 65_536  # above this, heatmaps are block-averaged


def block_mean(values: np.ndarray, max_rows: int, max_cols: int) -> tuple[np.ndarray, int, int]:
    """Average `(..., R, C)` over blocks so that it fits in `max_rows × max_cols`.

    Returns:
        The reduced array and the block sizes `(rows_per_block, cols_per_block)`
        (1, 1 when nothing was reduced). Ragged edge blocks average what they hold.
    """
    R, C = values.shape[-2:]
    br, bc = -(-R // max_rows), -(-C // max_cols)  # ceil division
    if br == 1 and bc == 1:
        return values, 1, 1
    rows = (
        np.add.reduceat(values, np.arange(0, R, br), axis=-2)
        / np.diff(np.r_[np.arange(0, R, br), R])[:, None]
    )
    cols = np.add.reduceat(rows, np.arange(0, C, bc), axis=-1) / np.diff(np.r_[np.arange(0, C, bc), C])
    return cols, br, bc


def block_labels(labels: list[str], block: int) -> list[str]:
    """Labels of blocks of `block` consecutive items: 'first–last'."""
    if block == 1:
        return list(labels)
    return [f"{labels[i]}–{labels[min(i + block, len(labels)) - 1]}" for i in range(0, len(labels), block)]


def fit(values: np.ndarray, q_labels, k_labels, max_cells: int):
    """Block-average `(..., Lq, Lk)` to at most `max_cells` cells in total.

    Returns:
        The values, the row and column labels (positions when None; escaped, one per block) and
        the block sizes (1, 1 when nothing was averaged).
    """
    n_panels = int(np.prod(values.shape[:-2])) or 1
    lq, lk = values.shape[-2:]
    q_labels = positions(lq) if q_labels is None else list(q_labels)
    k_labels = positions(lk) if k_labels is None else list(k_labels)
    per_panel = max(16, max_cells // n_panels)
    if lq * lk <= per_panel:
        return values, safe_labels(q_labels), safe_labels(k_labels), (1, 1)
    side = math.sqrt(per_panel / (lq * lk))
    reduced, br, bc = block_mean(values, max(1, int(lq * side)), max(1, int(lk * side)))
    return reduced, safe_labels(block_labels(q_labels, br)), safe_labels(block_labels(k_labels, bc)), (br, bc)


def cell_px(n: int) -> int:
    """Pixels per heatmap row for `n` rows: room for a readable label on every row up to 64."""
    if n <= LABEL_LIMIT:
        return int(max(14, min(24, 400 / max(n, 1))))
    return max(2, int(900 / n))


def font_px(cell: int) -> int:
    """Tick-label size for cells `cell` pixels tall."""
    return 12 if cell >= 20 else 11 if cell >= 16 else 10


def cell_range(n: int, reversed_: bool = False) -> dict:
    """An axis spanning exactly `n` cells (markers or shapes must not pad it); rows top-down."""
    return {"range": [n - 0.5, -0.5] if reversed_ else [-0.5, n - 0.5], "autorange": False}


def weight_scale(
    values: np.ndarray, blocked: np.ndarray | None, value_name: str = "weight"
) -> tuple[float, str]:
    """Top of the colour scale for `(..., R, C)` and a sentence saying how it was chosen.

    A row with a single allowed key holds one weight of exactly 1 (e.g. row 0 of a
    causal mask); letting it set the top would wash every other row out. The top is the
    largest value in rows with at least two allowed keys; rows above it show the darkest colour.
    """
    allowed = np.ones(values.shape, bool) if blocked is None else ~np.broadcast_to(blocked, values.shape)
    informative = allowed.sum(-1) >= 2  # (..., R)
    finite = np.isfinite(values)
    overall = float(values[finite].max(initial=0.0))
    rows = values[informative]  # (n, C)
    top = float(rows[np.isfinite(rows)].max(initial=0.0)) if rows.size else overall
    if not informative.any() or top <= 0:
        top = overall
    if overall <= 0:  # all blocked, or no difference anywhere
        return 1.0, f"Colour scale 0 to 1; every {value_name} shown is 0."
    if top < overall:
        return top, (
            f"Colour scale 0 to {top:.3g}: the largest {value_name} in rows with two or more allowed keys. "
            f"A row with a single allowed key holds one {value_name} of 1 and is drawn at the darkest colour, "
            "so it does not wash out the others."
        )
    return top, f"Colour scale 0 to {top:.3g}, the largest {value_name} shown."
