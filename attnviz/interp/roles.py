"""The head-role scan: what each head of a model does, scored on repeated random tokens.

Follows the definitions the Training lab uses (`attnviz.training`), which are
TransformerLens's: on a sequence of random tokens `r` followed by `r` again
(length `half` each), an **induction** head at position t of the second copy
attends to the token after the earlier occurrence of the current token (key
t − half + 1, Olsson et al., 2022); a **duplicate-token** head attends to the
earlier occurrence itself (key t − half); a **previous-token** head to key
t − 1; a **first-token** (sink) head to key 0.

Shapes: L layers, H heads, N sequences, T = 2·half tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from attnviz.errors import SpecError
from attnviz.training import induction_score, previous_token_score

ROLES = {
    "previous_token": "weight on the token before (key t − 1)",
    "induction": "weight on the token after the earlier copy of the current token (key t − half + 1)",
    "duplicate_token": "weight on the earlier copy of the current token (key t − half)",
    "first_token": "weight on the first token (key 0): an attention sink",
}
MAX_HALF, MAX_SEQUENCES = 256, 64


def duplicate_token_score(attn: np.ndarray, half: int | None = None) -> np.ndarray:
    """Mean weight from query t of the second copy to key t − half; `(..., N, T, T)` → `(...)`."""
    half = attn.shape[-1] // 2 if half is None else half
    t = np.arange(half, 2 * half)
    return attn[..., t, t - half].mean(axis=(-1, -2))


def first_token_score(attn: np.ndarray) -> np.ndarray:
    """Mean weight from queries t ≥ 1 to key 0; `(..., N, T, T)` → `(...)`."""
    return attn[..., 1:, 0].mean(axis=(-1, -2))


def role_scores(attn: np.ndarray) -> dict[str, np.ndarray]:
    """Every role's score per head.

    Args:
        attn: `(L, H, N, T, T)` attention on N repeated sequences `[r, r]` (T even).

    Returns:
        `{role: (L, H)}`, each score in [0, 1].
    """
    return {
        "previous_token": previous_token_score(attn),
        "induction": induction_score(attn),
        "duplicate_token": duplicate_token_score(attn),
        "first_token": first_token_score(attn),
    }


@dataclass(frozen=True)
class RoleScan:
    """A scan's result.

    Attributes:
        scores: `{role: (L, H)}` (`ROLES` names them).
        ids: `(N, T)` the token ids the model read.
        attentions: `(L, H, T, T)` the attention on the first sequence (for the click-through).
        tokens: the first sequence's tokens as text.
    """

    scores: dict[str, np.ndarray]
    ids: np.ndarray
    attentions: np.ndarray
    tokens: list[str]

    def top(self, role: str, n: int = 5) -> list[tuple[int, int, float]]:
        """The `n` highest-scoring heads for `role`: `(layer, head, score)`, best first."""
        grid = self.scores[role]
        order = np.argsort(-grid, axis=None, kind="stable")[:n]
        return [(int(i // grid.shape[1]), int(i % grid.shape[1]), float(grid.flat[i])) for i in order]


def plain_token_ids(ckpt) -> np.ndarray:
    """Ids of the tokenizer's ordinary tokens (no special or added tokens), ascending."""
    vocab = ckpt.n_tokens
    added = set(ckpt.tokenizer.get_added_tokens_decoder())
    return np.array([i for i in range(vocab) if i not in added], dtype=np.int64)


def repeated_sequences(ckpt, half: int, n: int, seed: int) -> np.ndarray:
    """`(n, 2·half)` ids: each row `n` random ordinary tokens drawn without repeats, then again."""
    _check_int("half", half, 2, MAX_HALF)
    _check_int("n", n, 1, MAX_SEQUENCES)
    _check_int("seed", seed, 0, 2**32 - 1)
    pool = plain_token_ids(ckpt)
    limit = ckpt.config.max_position_embeddings
    if 2 * half > limit or half > len(pool):
        raise SpecError(
            "half", half, f"2 … {min(limit // 2, len(pool), MAX_HALF)} (the model's positions and vocabulary)"
        )
    rng = np.random.default_rng(seed)
    first = np.stack([rng.choice(pool, size=half, replace=False) for _ in range(n)])
    return np.concatenate([first, first], axis=1)


def scan(
    ckpt,
    framework: str = "torch",
    *,
    half: int = 16,
    n: int = 4,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> RoleScan:
    """Score every head of `ckpt` for each role in `ROLES`, on `n` repeated random sequences.

    Args:
        half: the length of the random half (the model reads `2·half` tokens).
        progress: called with `(done, n)` after each sequence.
    """
    ids = repeated_sequences(ckpt, half, n, seed)
    # Every score is a mean over sequences and positions, the same count per sequence, so the mean of
    # per-sequence scores is the scan's: one sequence's attention is alive at a time, never N of them.
    total, first = None, None
    for i, row in enumerate(ids):
        attn = ckpt.run_ids([int(t) for t in row], framework).attentions.astype(np.float64)  # (L, H, T, T)
        scores = role_scores(attn[:, :, None])  # one sequence: (L, H, 1, T, T)
        total = scores if total is None else {r: total[r] + scores[r] for r in scores}
        first = attn if first is None else first
        if progress:
            progress(i + 1, n)
    tokens = ckpt.labels([int(t) for t in ids[0]])
    return RoleScan({r: s / n for r, s in total.items()}, ids, first, tokens)


def _check_int(name: str, value, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or not low <= value <= high:
        raise SpecError(name, value, f"an integer {low} … {high}")
