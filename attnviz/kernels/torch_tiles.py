"""FlashAttention's forward in PyTorch, one tile at a time (Dao et al., 2022, Algorithm 1); the twin of
`tf_tiles.py`, line for line.

Shapes: B batch, H heads, Lq/Lk lengths, Dk/Dv head widths, bq/bk a tile's rows and keys.
"""

from __future__ import annotations

import math

import torch


def tiled_forward(q, k, v, blocks, *, record):
    """softmax(q·kᵀ/√Dk)·v over the tiles `blocks` lays out (`attnviz.kernels.tiles.plan`).

    Args:
        q, k, v: NumPy `(B, H, Lq, Dk)`, `(B, H, Lk, Dk)`, `(B, H, Lk, Dv)`; computed in their dtype.
        blocks: the query blocks, each with its key tiles (`tiles.Block`).
        record: called once per tile with `(block, tile, m_before, m_after, l_before, l_after, scores,
            output so far)`.

    Returns:
        The output `(B, H, Lq, Dv)` as a tensor.
    """
    q, k, v = (torch.from_numpy(x) for x in (q, k, v))
    scale = 1.0 / math.sqrt(q.shape[-1])
    rows_out = []
    for block in blocks:
        q_i = q[:, :, block.rows]  # (B, H, bq, Dk)
        m = torch.full(q_i.shape[:-1], -math.inf, dtype=q.dtype)  # (B, H, bq) running row max
        l = torch.zeros_like(m)  # (B, H, bq) running denominator
        acc = torch.zeros((*q_i.shape[:-1], v.shape[-1]), dtype=q.dtype)  # (B, H, bq, Dv)
        for tile in block.tiles:
            if tile.skipped:  # every key is in every row's future: nothing to compute
                record(block, tile, m, m, l, l, None, acc / l[..., None])
                continue
            k_j, v_j = k[:, :, tile.keys], v[:, :, tile.keys]  # (B, H, bk, Dk), (B, H, bk, Dv)
            s = q_i @ k_j.transpose(-2, -1) * scale  # (B, H, bq, bk) the score tile
            if tile.mask is not None:  # the diagonal cuts this tile
                s = s.masked_fill(~torch.from_numpy(tile.mask), -math.inf)
            m_new = torch.maximum(m, s.amax(dim=-1))  # (B, H, bq)
            p = torch.exp(s - m_new[..., None])  # (B, H, bq, bk) unnormalised weights
            alpha = torch.exp(m - m_new)  # (B, H, bq) rescales what was summed under the old max
            l_new = alpha * l + p.sum(dim=-1)
            acc = alpha[..., None] * acc + p @ v_j  # (B, H, bq, Dv)
            record(block, tile, m, m_new, l, l_new, s, acc / l_new[..., None])
            m, l = m_new, l_new
        rows_out.append(acc / l[..., None])  # (B, H, bq, Dv)
    return torch.cat(rows_out, dim=2)  # (B, H, Lq, Dv)
