"""Numbers about attention weights: per-head summaries, downsampling, differences, rollout."""

from __future__ import annotations

import numpy as np

from attnviz.errors import SpecError


def head_summary(
    weights: np.ndarray, key_labels: list[str] | None = None, allowed: np.ndarray | None = None
) -> list[dict]:
    """Per head: mean entropy (nats) of the rows that attend, max weight, key looked at most.

    Args:
        weights: `(H, Lq, Lk)` for one batch item.
        key_labels: names of the keys (defaults to their positions).
        allowed: `(Lq, Lk)` bool, True where the mask lets a query attend (None: every key).

    Returns:
        One dict per head: `head`, `entropy`, `max_entropy` (mean over the rows of
        log of the row's allowed keys), `of_max` (mean over the rows with at least two
        allowed keys of entropy / log(allowed keys); None when there is no such row),
        `max_weight`, `top_key` (the key with the most total weight) and its `top_key_share`.
    """
    H, Lq, Lk = weights.shape
    labels = key_labels or [str(j) for j in range(Lk)]
    n_allowed = np.full(Lq, Lk) if allowed is None else np.asarray(allowed, bool).sum(-1)  # (Lq,)
    live = weights.sum(-1) > 0  # (H, Lq): rows with at least one allowed key
    logs = np.log(np.where(weights > 0, weights, 1.0))
    entropy = -(weights * logs).sum(-1)  # (H, Lq)
    reach = np.log(np.maximum(n_allowed, 1))  # (Lq,): the entropy each row can reach
    rows = []
    for h in range(H):
        per_key = weights[h].sum(0)  # (Lk,)
        total = per_key.sum()
        top = int(per_key.argmax())
        spread = live[h] & (n_allowed >= 2)
        rows.append(
            {
                "head": h,
                "entropy": float(entropy[h][live[h]].mean()) if live[h].any() else 0.0,
                "max_entropy": float(reach[live[h]].mean()) if live[h].any() else 0.0,
                "of_max": float((entropy[h][spread] / reach[spread]).mean()) if spread.any() else None,
                "max_weight": float(weights[h].max()),
                "top_key": labels[top],
                "top_key_share": float(per_key[top] / total) if total > 0 else 0.0,
            }
        )
    return rows


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


def differences(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    """max |a - b| and that over max |b| (finite entries only; ±inf must match)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    finite = np.isfinite(a) & np.isfinite(b)
    same_inf = bool((np.isfinite(a) == np.isfinite(b)).all() and (a[~finite] == b[~finite]).all())
    max_abs = float(np.abs(a[finite] - b[finite]).max(initial=0.0))
    scale = float(np.abs(b[finite]).max(initial=0.0))
    if not same_inf:  # blocked (-inf) cells in one and not the other
        return {"max_abs": float("inf"), "rel": float("inf")}
    return {"max_abs": max_abs, "rel": max_abs / scale if scale else max_abs}


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


def cosine_similarity(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """cos(a, b) over the last axis (1 where both are zero vectors)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    dot, norms = (a * b).sum(-1), np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)
    return np.divide(dot, norms, out=np.ones_like(dot), where=norms > 0)


def kl_divergence(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """KL(p ‖ q) = Σ p·log(p/q) in nats over the last axis (terms with p = 0 count 0)."""
    p, q = np.asarray(p, np.float64), np.asarray(q, np.float64)
    ratio = np.log(np.where(p > 0, p, 1.0)) - np.log(np.where(p > 0, q, 1.0))
    return (p * ratio).sum(-1)
