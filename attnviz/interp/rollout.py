"""Attention rollout: how much of each token's final representation flows from each input token."""

from __future__ import annotations

import numpy as np

from attnviz.errors import SpecError

HEAD_REDUCTIONS = ("mean", "max", "min")


def attention_rollout(
    attentions: np.ndarray, *, residual: bool = True, head_reduce: str = "mean"
) -> np.ndarray:
    """Attention rollout (Abnar & Zuidema, 2020, "Quantifying Attention Flow in Transformers").

    Per layer the heads are reduced to one matrix A (`head_reduce`); with `residual`, the
    residual connection is counted as attention to oneself, A' = 0.5·A + 0.5·I; each row is
    renormalised to sum to 1; the layers are multiplied through, last layer on the left:
    R = A'_{L-1} ⋯ A'_1 · A'_0. Row i of R says how much of token i's final representation flows
    from each input token.

    Args:
        attentions: `(layers, heads, T, T)` attention probabilities (rows sum to 1, or 0 when
            a row attends nowhere).
        residual: add the identity for the residual connection.
        head_reduce: "mean", "max" or "min" over heads.

    Returns:
        `(T, T)` float64; rows sum to 1 (rows that attend nowhere stay 0 without `residual`).
    """
    A = np.asarray(attentions, np.float64)
    if A.ndim != 4 or A.shape[-1] != A.shape[-2] or 0 in A.shape:
        raise SpecError(
            "attentions", A.shape, "shape (layers, heads, T, T)", value_text=f"an array of shape {A.shape}"
        )
    if head_reduce not in HEAD_REDUCTIONS:
        raise SpecError("head_reduce", head_reduce, " | ".join(map(repr, HEAD_REDUCTIONS)))
    if not np.isfinite(A).all():
        raise SpecError("attentions", None, "finite attention weights", value_text="NaN or infinite values")
    T = A.shape[-1]
    rollout = np.eye(T)
    for layer in getattr(np, head_reduce)(A, axis=1):  # (T, T) per layer, first layer first
        if residual:
            layer = 0.5 * layer + 0.5 * np.eye(T)
        total = layer.sum(-1, keepdims=True)
        layer = np.divide(layer, total, out=np.zeros_like(layer), where=total > 0)
        rollout = layer @ rollout  # (T, T)
    return rollout
