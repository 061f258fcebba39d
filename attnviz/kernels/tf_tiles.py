"""FlashAttention's forward in TensorFlow, one tile at a time (Dao et al., 2022, Algorithm 1); the twin of
`torch_tiles.py`, line for line.

Shapes: B batch, H heads, Lq/Lk lengths, Dk/Dv head widths, bq/bk a tile's rows and keys.
"""

from __future__ import annotations

import math

import tensorflow as tf


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
    q, k, v = (tf.constant(x) for x in (q, k, v))
    scale = 1.0 / math.sqrt(q.shape[-1])
    rows_out = []
    for block in blocks:
        q_i = q[:, :, block.rows]  # (B, H, bq, Dk)
        m = tf.fill(tf.shape(q_i)[:-1], tf.constant(-math.inf, dtype=q.dtype))  # (B, H, bq) running row max
        l = tf.zeros_like(m)  # (B, H, bq) running denominator
        acc = tf.zeros((*q_i.shape[:-1], v.shape[-1]), dtype=q.dtype)  # (B, H, bq, Dv)
        for tile in block.tiles:
            if tile.skipped:  # every key is in every row's future: nothing to compute
                record(block, tile, m, m, l, l, None, acc / l[..., None])
                continue
            k_j, v_j = k[:, :, tile.keys], v[:, :, tile.keys]  # (B, H, bk, Dk), (B, H, bk, Dv)
            s = tf.matmul(q_i, k_j, transpose_b=True) * scale  # (B, H, bq, bk) the score tile
            if tile.mask is not None:  # the diagonal cuts this tile
                s = tf.where(tf.constant(tile.mask), s, tf.constant(-math.inf, dtype=s.dtype))
            m_new = tf.maximum(m, tf.reduce_max(s, axis=-1))  # (B, H, bq)
            p = tf.exp(s - m_new[..., None])  # (B, H, bq, bk) unnormalised weights
            alpha = tf.exp(m - m_new)  # (B, H, bq) rescales what was summed under the old max
            l_new = alpha * l + tf.reduce_sum(p, axis=-1)
            acc = alpha[..., None] * acc + tf.matmul(p, v_j)  # (B, H, bq, Dv)
            record(block, tile, m, m_new, l, l_new, s, acc / l_new[..., None])
            m, l = m_new, l_new
        rows_out.append(acc / l[..., None])  # (B, H, bq, Dv)
    return tf.concat(rows_out, axis=2)  # (B, H, Lq, Dv)
