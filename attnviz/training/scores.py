"""How close each head is to a known pattern: mirror, previous token, induction, diagonal, entropy.

Each score takes attention probabilities `(..., N, T, T)` (N probe sequences)
and averages over the sequences and the queries that have the pattern.
"""

from __future__ import annotations

import numpy as np


def mirror_score(attn: np.ndarray) -> np.ndarray:
    """Mean weight query i puts on key T−1−i (the reverse task's anti-diagonal).

    Args:
        attn: `(..., N, T, T)` attention probabilities (N sequences).

    Returns:
        `(...)`: 1 for a perfect mirror, 1/T for uniform attention.
    """
    T = attn.shape[-1]
    i = np.arange(T)
    return attn[..., i, T - 1 - i].mean(axis=(-1, -2))


def previous_token_score(attn: np.ndarray) -> np.ndarray:
    """Mean weight query i (i ≥ 1) puts on key i−1; `attn (..., N, T, T)` → `(...)`."""
    i = np.arange(1, attn.shape[-1])
    return attn[..., i, i - 1].mean(axis=(-1, -2))


def diagonal_score(attn: np.ndarray) -> np.ndarray:
    """Mean weight query i puts on key i (itself); `attn (..., N, T, T)` → `(...)`."""
    i = np.arange(attn.shape[-1])
    return attn[..., i, i].mean(axis=(-1, -2))


def induction_score(attn: np.ndarray, half: int | None = None) -> np.ndarray:
    """Mean weight from a token in the second copy to the token after its first occurrence.

    On a repeated sequence `[r, r]` with `len(r) = half` (default T//2), query
    t ≥ half holds the token seen at t − half; an induction head attends to the
    token that followed it, key t − half + 1 (Olsson et al., 2022).

    Args:
        attn: `(..., N, T, T)` attention on repeated sequences.

    Returns:
        `(...)`: 1 for a perfect induction head.
    """
    half = attn.shape[-1] // 2 if half is None else half
    t = np.arange(half, 2 * half)
    return attn[..., t, t - half + 1].mean(axis=(-1, -2))


def entropy(attn: np.ndarray) -> np.ndarray:
    """Mean entropy (nats) of the attention rows: `(..., N, T, T)` → `(...)`; 0 = one key per query."""
    p = np.clip(attn, 0.0, 1.0)
    logs = np.log(np.where(p > 0, p, 1.0))
    return -(p * logs).sum(-1).mean(axis=(-1, -2))


SCORES = {
    "mirror": "weight on key T−1−i (reverse)",
    "previous_token": "weight on key i−1",
    "induction": "weight on the token after the earlier copy (repeated sequences)",
    "diagonal": "weight on itself (key i)",
    "entropy": "mean row entropy in nats (0 = focused)",
}


def pattern_scores(attn: np.ndarray, induction_attn: np.ndarray) -> dict[str, np.ndarray]:
    """Every score per head, each `(L, H)`.

    Args:
        attn: `(N, L, H, T, T)` on the task's probe.
        induction_attn: `(N, L, H, T, T)` on `induction_probe` sequences.
    """
    by_head = np.moveaxis(attn, 0, 2)  # (L, H, N, T, T)
    return {
        "mirror": mirror_score(by_head),
        "previous_token": previous_token_score(by_head),
        "induction": induction_score(np.moveaxis(induction_attn, 0, 2)),
        "diagonal": diagonal_score(by_head),
        "entropy": entropy(by_head),
    }
