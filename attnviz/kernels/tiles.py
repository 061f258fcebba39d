"""FlashAttention's forward replayed tile by tile: the plan, the record, the memory (Dao et al., 2022).

FlashAttention never forms the Lq × Lk score matrix. It walks query blocks; for each one it walks the
key blocks, computes one score tile, and keeps per query row a running max `m`, a running denominator
`l` and an accumulator of the output, rescaling both by `exp(m_old − m_new)` whenever the max grows
(the online softmax, Milakov & Gimelshein, 2018). After the last key block the accumulator divided by
`l` is exactly softmax(q·kᵀ/√d)·v.

The math is written twice, line for line — `torch_tiles.py` and `tf_tiles.py`, the same names — and the
plumbing once, here: which tiles exist and which are skipped (`plan`), what each tile recorded (`Tile`),
and the working memory of the pass against the matrix it never forms (`Memory`).

Shapes: B batch, H heads, Lq/Lk lengths, Dk/Dv head widths, bq/bk the block sizes (the last block of
each axis may be shorter). Causal is top-left, as `attnviz.masks.causal`: query i may attend keys 0…i.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, NamedTuple

import numpy as np

from attnviz.errors import SpecError
from attnviz.frameworks import backend, check_framework, installed

BLOCK_ALLOWED = "an integer ≥ 1"


class KeyBlock(NamedTuple):
    """One key block of a query block's walk: its number, its keys (a slice of 0…Lk−1), whether it is
    skipped (wholly above the causal diagonal), and `mask (rows, keys)` bool, True = may attend, only where
    the diagonal cuts the tile (None where every pair is allowed)."""

    index: int
    keys: slice
    skipped: bool
    mask: np.ndarray | None


@dataclass(frozen=True)
class Block:
    """One query block: its number, its queries (a slice of 0…Lq−1) and the key blocks it visits, in order."""

    index: int
    rows: slice
    tiles: tuple[KeyBlock, ...]


@dataclass(frozen=True)
class Tile:
    """What one (query block, key block) tile did.

    Attributes:
        q_block, k_block: the tile's block numbers.
        queries, keys: the query rows and the keys it covered (ranges).
        skipped: True when every key lies above the causal diagonal for every row (nothing computed).
        m_before, m_after: the running row max `(B, H, rows)` before and after the tile.
        l_before, l_after: the running denominator `(B, H, rows)` before and after.
        scores: the scaled (and masked, −inf) score tile `(B, H, rows, keys)`; None when skipped.
        output: the rows' output so far, accumulator / l, after the tile `(B, H, rows, Dv)`.
    """

    q_block: int
    k_block: int
    queries: range
    keys: range
    skipped: bool
    m_before: np.ndarray
    m_after: np.ndarray
    l_before: np.ndarray
    l_after: np.ndarray
    scores: np.ndarray | None
    output: np.ndarray


@dataclass(frozen=True)
class Memory:
    """Bytes held at once by the tiled pass against the score matrix a plain softmax forms.

    Attributes:
        parts: name → bytes of the largest tile or accumulator of each kind held at once (over B × H).
        tiled: their sum, the working memory of the tiled pass (inputs and output not counted).
        full: the Lq × Lk score matrix, B × H of them, in the same precision.
    """

    parts: dict[str, int]
    tiled: int
    full: int

    @property
    def ratio(self) -> float:
        """full / tiled: how many times less the tiled pass holds."""
        return self.full / self.tiled


@dataclass(frozen=True)
class TiledAttention:
    """`tiled_attention`'s result.

    Attributes:
        output: softmax(q·kᵀ/√Dk)·v computed tile by tile, `(B, H, Lq, Dv)`, in the inputs' dtype.
        tiles: every tile, query block by query block, key blocks in order within each.
        memory: the pass's working memory against the Lq × Lk matrix.
    """

    output: np.ndarray
    tiles: list[Tile]
    memory: Memory
    framework: str
    block_q: int
    block_k: int
    causal: bool

    @property
    def n_blocks(self) -> tuple[int, int]:
        """(query blocks, key blocks)."""
        return self.tiles[-1].q_block + 1, self.tiles[-1].k_block + 1

    def tile(self, q_block: int, k_block: int) -> Tile:
        return self.tiles[q_block * self.n_blocks[1] + k_block]


def check_block(field: str, value: Any) -> int:
    """`value` as a block size, or a `SpecError` naming `field`."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise SpecError(field, value, BLOCK_ALLOWED)
    return int(value)


def check_inputs(q: Any, k: Any, v: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q `(B, H, Lq, Dk)`, k `(B, H, Lk, Dk)`, v `(B, H, Lk, Dv)`, one floating dtype; else a `SpecError`."""
    q, k, v = (np.asarray(x) for x in (q, k, v))
    for name, x in (("q", q), ("k", k), ("v", v)):
        if x.ndim != 4 or 0 in x.shape:
            raise SpecError(name, x.shape, "a non-empty array of shape (B, H, L, d)")
        if x.dtype not in (np.float32, np.float64):
            raise SpecError(name, x.dtype, "float32 or float64", value_text=str(x.dtype))
        if x.dtype != q.dtype:
            raise SpecError(name, x.dtype, f"q's dtype, {q.dtype}", value_text=str(x.dtype))
    if k.shape[:2] != q.shape[:2] or k.shape[3] != q.shape[3]:
        raise SpecError("k", k.shape, f"(B, H, Lk, Dk) = ({q.shape[0]}, {q.shape[1]}, Lk, {q.shape[3]})")
    if v.shape[:3] != k.shape[:3]:
        raise SpecError("v", v.shape, f"(B, H, Lk, Dv) with (B, H, Lk) = {k.shape[:3]}")
    return q, k, v


def plan(len_q: int, len_k: int, block_q: int, block_k: int, causal: bool) -> list[Block]:
    """Every query block and its key blocks; a tile wholly above the causal diagonal is skipped, one the
    diagonal cuts carries its mask."""
    blocks = []
    for i, r0 in enumerate(range(0, len_q, block_q)):
        rows = slice(r0, min(r0 + block_q, len_q))
        tiles = []
        for j, c0 in enumerate(range(0, len_k, block_k)):
            keys = slice(c0, min(c0 + block_k, len_k))
            skipped = causal and keys.start > rows.stop - 1  # the first key is after the last query
            cut = causal and not skipped and keys.stop - 1 > rows.start  # some key after some query
            mask = (
                np.arange(rows.start, rows.stop)[:, None] >= np.arange(keys.start, keys.stop) if cut else None
            )
            tiles.append(KeyBlock(j, keys, skipped, mask))
        blocks.append(Block(i, rows, tuple(tiles)))
    return blocks


def memory(
    batch_heads: int, len_q: int, len_k: int, d_k: int, d_v: int, block_q: int, block_k: int, itemsize: int
) -> Memory:
    """The largest tiles and accumulators the pass holds at once (`batch_heads` = B × H of each), against
    B × H Lq × Lk matrices; `itemsize` bytes per number. A block longer than its axis holds the axis."""
    bq, bk = min(block_q, len_q), min(block_k, len_k)
    elements = {
        "query tile (bq × Dk)": bq * d_k,
        "key tile (bk × Dk)": bk * d_k,
        "value tile (bk × Dv)": bk * d_v,
        "score tile (bq × bk)": bq * bk,
        "accumulator (bq × Dv)": bq * d_v,
        "running m and l (2 × bq)": 2 * bq,
    }
    parts = {name: batch_heads * n * itemsize for name, n in elements.items()}
    return Memory(parts, sum(parts.values()), batch_heads * len_q * len_k * itemsize)


def _torch() -> ModuleType:
    from attnviz.kernels import torch_tiles

    return torch_tiles


def _tensorflow() -> ModuleType:
    from attnviz.kernels import tf_tiles

    return tf_tiles


# Framework → its twin of the math (same names in both), imported on first use.
TWINS: dict[str, Callable[[], ModuleType]] = {"torch": _torch, "tensorflow": _tensorflow}


def twin(framework: str) -> ModuleType:
    """The framework's tile math, through the framework's one door (`attnviz.frameworks.backend`: it
    refuses a framework that is not installed, with its install command)."""
    backend(check_framework(framework))
    return TWINS[framework]()


def tiled_attention(
    q, k, v, *, block_q, block_k, causal: bool = False, framework: str | None = None, progress=None
):
    """softmax(q·kᵀ/√Dk)·v computed as FlashAttention does, tile by tile, every tile recorded.

    Args:
        q: `(B, H, Lq, Dk)` NumPy array, float32 or float64; the pass computes in this dtype.
        k: `(B, H, Lk, Dk)`; Lk may differ from Lq.
        v: `(B, H, Lk, Dv)`.
        block_q: queries per block, an integer ≥ 1 (need not divide Lq).
        block_k: keys per block, an integer ≥ 1 (need not divide Lk).
        causal: query i attends keys 0…i only; tiles wholly above the diagonal are skipped.
        framework: "torch" | "tensorflow"; None: the first installed (PyTorch where both are).
        progress: called as `progress(tiles done, tiles in all)` after each tile; whatever it raises
            ends the pass (a worker's task stops between two tiles this way).

    Returns:
        `TiledAttention` with `.output (B, H, Lq, Dv)`, `.tiles` and `.memory`.

    Raises:
        SpecError: a bad block size (field `block_q` / `block_k`), input, `causal` or framework.
    """
    block_q, block_k = check_block("block_q", block_q), check_block("block_k", block_k)
    if framework is None:
        framework = (installed() or ["torch"])[0]  # none installed: twin() names the install command
    if not isinstance(causal, bool | np.bool_):
        raise SpecError("causal", causal, "True | False")
    q, k, v = check_inputs(q, k, v)
    blocks = plan(q.shape[2], k.shape[2], block_q, block_k, bool(causal))
    total = sum(len(block.tiles) for block in blocks)
    tiles: list[Tile] = []

    def record(
        block: Block, key_block: KeyBlock, m_before, m_after, l_before, l_after, scores, output
    ) -> None:
        queries, keys = (
            range(block.rows.start, block.rows.stop),
            range(key_block.keys.start, key_block.keys.stop),
        )
        m_l = (np.asarray(x) for x in (m_before, m_after, l_before, l_after))
        scores = None if scores is None else np.asarray(scores)
        tiles.append(Tile(block.index, key_block.index, queries, keys, key_block.skipped, *m_l, scores,
                          np.asarray(output)))  # fmt: skip
        if progress is not None:
            progress(len(tiles), total)

    output = twin(framework).tiled_forward(q, k, v, blocks, record=record)
    (B, H, Lq, Dk), (Lk, Dv) = q.shape, v.shape[2:]
    held = memory(B * H, Lq, Lk, Dk, Dv, block_q, block_k, q.dtype.itemsize)
    return TiledAttention(np.asarray(output), tiles, held, framework, block_q, block_k, bool(causal))
