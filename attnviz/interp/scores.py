"""Per-head scores: how close each head is to a known pattern, and how spread out its weights are.

The one home of every score a page or the Training lab puts on a head: mirror, previous token,
induction, duplicate token, first token, diagonal, a fixed offset, and the one entropy
(`row_entropy`, which `entropy`, `head_summary` and `roles.head_roles` all read). The pattern
scores follow TransformerLens's definitions (Olsson et al., 2022, for induction). Each pattern
score takes attention probabilities `(..., N, T, T)` (N sequences) and averages over the
sequences and the queries that have the pattern.
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


def duplicate_token_score(attn: np.ndarray, half: int | None = None) -> np.ndarray:
    """Mean weight from query t of the second copy to key t − half (the earlier copy of its own
    token); `(..., N, T, T)` → `(...)`."""
    half = attn.shape[-1] // 2 if half is None else half
    t = np.arange(half, 2 * half)
    return attn[..., t, t - half].mean(axis=(-1, -2))


def first_token_score(attn: np.ndarray) -> np.ndarray:
    """Mean weight from queries t ≥ 1 to key 0 (an attention sink); `(..., N, T, T)` → `(...)`."""
    return attn[..., 1:, 0].mean(axis=(-1, -2))


def offset_score(weights: np.ndarray, offset: int) -> np.ndarray:
    """Mean weight from query i (i ≥ 1) to key i + offset, over the queries that have that key;
    `weights (H, T, T)` → `(H,)`."""
    H, T, _ = weights.shape
    rows = [i for i in range(1, T) if 0 <= i + offset < T]
    if not rows:
        return np.zeros(H)
    rows_ = np.array(rows)
    return weights[:, rows_, rows_ + offset].mean(-1)


def row_entropy(attn: np.ndarray) -> np.ndarray:
    """Entropy in nats of each attention row: `(..., T)` → `(...)`; 0 = all weight on one key,
    log(keys) = uniform. A zero weight adds nothing (0 · log 0 = 0), so a row that attends
    nowhere has entropy 0."""
    p = np.clip(attn, 0.0, 1.0)
    return -(p * np.log(np.where(p > 0, p, 1.0))).sum(-1)


def entropy(attn: np.ndarray) -> np.ndarray:
    """Mean entropy (nats) of the attention rows: `(..., N, T, T)` → `(...)`; 0 = one key per query."""
    return row_entropy(attn).mean(axis=(-1, -2))


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


# Keys whose shares differ by less than this tie (half a percent: the pages show whole percents).
TIE_SHARE = 0.005


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
        `max_weight`, `top_key` (the key with the most total weight), its position `top_key_index`
        (a word can occur more than once), its `top_key_share`, and `top_key_ties`: how many keys
        hold a share within `TIE_SHARE` of it (1 when one key stands out; a head spread evenly over
        11 keys ties 11, and its "top key" is only the first of them); `single_key_rows`: how many
        rows with one allowed key these leave out. Such a row holds a single weight 1 whatever the
        head does (a causal mask's row 0), so the max weight and the top key read only the rows with
        two or more allowed keys, when there are any (the heatmaps' colour scale does the same).
    """
    H, Lq, Lk = weights.shape
    labels = key_labels or [str(j) for j in range(Lk)]
    n_allowed = np.full(Lq, Lk) if allowed is None else np.asarray(allowed, bool).sum(-1)  # (Lq,)
    live = weights.sum(-1) > 0  # (H, Lq): rows with at least one allowed key
    nats = row_entropy(weights)  # (H, Lq)
    reach = np.log(np.maximum(n_allowed, 1))  # (Lq,): the entropy each row can reach
    rows = []
    for h in range(H):
        spread = live[h] & (n_allowed >= 2)
        counted = spread if spread.any() else live[h] if live[h].any() else np.ones(Lq, bool)  # (Lq,)
        per_key = weights[h][counted].sum(0)  # (Lk,)
        total = per_key.sum()
        top = int(per_key.argmax())
        rows.append(
            {
                "head": h,
                "entropy": float(nats[h][live[h]].mean()) if live[h].any() else 0.0,
                "max_entropy": float(reach[live[h]].mean()) if live[h].any() else 0.0,
                "of_max": float((nats[h][spread] / reach[spread]).mean()) if spread.any() else None,
                "max_weight": float(weights[h][counted].max()),
                "top_key": labels[top],
                "top_key_index": top,
                "top_key_share": float(per_key[top] / total) if total > 0 else 0.0,
                "top_key_ties": int((per_key >= per_key[top] - TIE_SHARE * total).sum()) if total > 0 else Lk,
                "single_key_rows": int((live[h] & ~counted).sum()),
            }
        )
    return rows


def looks_most_at(row: dict) -> str:
    """A head summary's key in words: the word and its position ("the" can occur three times), or the
    tie when several keys share the top ("no single key: 11 tie at 9% each", not the first of them)."""
    if row["top_key_ties"] > 1:
        return f"no single key: {row['top_key_ties']} tie at {row['top_key_share']:.0%} each"
    return f"“{row['top_key']}” (position {row['top_key_index']})"
