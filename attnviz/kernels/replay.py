"""Reading a tiled pass step by step, for a page or a lesson: where the pass is, and how far each output
row still is from the full softmax.

A step is one tile, in the order the pass visits them (`TiledAttention.tiles`).
"""

from __future__ import annotations

import numpy as np

from attnviz.kernels.tiles import TiledAttention

TODO, DONE, CURRENT, SKIPPED, MASKED = 0, 1, 2, 3, 4  # a cell's state in `status`


def status(result: TiledAttention, step: int) -> np.ndarray:
    """`(Lq, Lk)`: each score cell's state at `step` — TODO, DONE (computed by an earlier tile, then
    dropped), CURRENT (in the tile held now), SKIPPED (its tile lies wholly above the causal diagonal: never
    computed) or MASKED (above the diagonal in a tile the diagonal cuts: computed, then set to −∞)."""
    last = result.tiles[-1]
    grid = np.full((last.queries.stop, last.keys.stop), TODO, dtype=np.int8)
    for n, tile in enumerate(result.tiles):
        if n > step and not tile.skipped:
            continue
        state = SKIPPED if tile.skipped else CURRENT if n == step else DONE
        grid[tile.queries.start : tile.queries.stop, tile.keys.start : tile.keys.stop] = state
    if result.causal:
        future = np.triu(np.ones(grid.shape, dtype=bool), k=1)  # key j after query i
        grid[future & np.isin(grid, (DONE, CURRENT))] = MASKED
    return grid


def distance(result: TiledAttention, full: np.ndarray) -> np.ndarray:
    """`(tiles, rows)`: after each tile, max over (B, H, Dv) of |output so far − `full`| for each of the
    tile's query rows; `full (B, H, Lq, Dv)` is softmax(q·kᵀ/√d)·v computed whole. The last key block of
    each query block leaves only rounding."""
    rows = max(len(t.queries) for t in result.tiles)
    out = np.full((len(result.tiles), rows), np.nan)
    for n, tile in enumerate(result.tiles):
        gap = np.abs(np.asarray(tile.output, np.float64) - full[:, :, tile.queries.start : tile.queries.stop])
        out[n, : len(tile.queries)] = gap.max(axis=(0, 1, 3))  # (rows,)
    return out


def block_steps(result: TiledAttention, step: int) -> list[int]:
    """The steps (tile numbers) of `step`'s query block, in order."""
    q_block = result.tiles[step].q_block
    return [n for n, t in enumerate(result.tiles) if t.q_block == q_block]
