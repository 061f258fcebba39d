"""Numbers about attention weights: per-head summaries, downsampling, differences."""

from __future__ import annotations

import numpy as np


def head_summary(weights: np.ndarray, key_labels: list[str] | None = None) -> list[dict]:
    """Per head: mean entropy (nats) of the rows that attend, max weight, key looked at most.

    Args:
        weights: `(H, Lq, Lk)` for one batch item.
        key_labels: names of the keys (defaults to their positions).

    Returns:
        One dict per head: `head`, `entropy`, `max_entropy`, `max_weight`,
        `top_key` (the key with the most total weight) and its `top_key_share`.
    """
    H, _, Lk = weights.shape
    labels = key_labels or [str(j) for j in range(Lk)]
    live = weights.sum(-1) > 0  # (H, Lq): rows with at least one allowed key
    logs = np.log(np.where(weights > 0, weights, 1.0))
    entropy = -(weights * logs).sum(-1)  # (H, Lq)
    rows = []
    for h in range(H):
        per_key = weights[h].sum(0)  # (Lk,)
        total = per_key.sum()
        top = int(per_key.argmax())
        rows.append(
            {
                "head": h,
                "entropy": float(entropy[h][live[h]].mean()) if live[h].any() else 0.0,
                "max_entropy": float(np.log(Lk)),
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
