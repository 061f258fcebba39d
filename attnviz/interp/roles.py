"""Head roles: what each head does, named — on the visitor's own text, and on repeated random tokens.

**On one text** (`head_roles`, the Pretrained page): a head's attention on a sentence is summarised
by the mean weight its queries give to a position relative to themselves (an *offset*: −1 the token
before, 0 the token itself, +1 the token after) and to fixed positions (the first and the last
token). The query at position 0 is left out of every score: it has no token before it, and in a
decoder it can only attend to itself. These follow the positional roles of Clark et al., 2019
("What does BERT look at?"). Shapes: H heads, T tokens; `weights (H, T, T)`, rows sum to 1.

**The role scan** (`scan`, the Interpretability page) scores every head of a model with the
definitions the Training lab uses (`attnviz.interp.scores`), which are TransformerLens's: on a
sequence of random tokens `r` followed by `r` again (length `half` each), an **induction** head at
position t of the second copy attends to the token after the earlier occurrence of the current token
(key t − half + 1, Olsson et al., 2022); a **duplicate-token** head attends to the earlier occurrence
itself (key t − half); a **previous-token** head to key t − 1; a **first-token** (sink) head to key 0.
Shapes: L layers, H heads, N sequences, T = 2·half tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnviz.errors import SpecError
from attnviz.exec.monitor import Monitor, watch
from attnviz.interp.scores import (
    duplicate_token_score,
    first_token_score,
    induction_score,
    offset_score,
    previous_token_score,
    row_entropy,
)

# -- on one text ---------------------------------------------------------------------

MAX_OFFSET = 3  # offsets −3 … +3 are named; farther ones rarely describe a whole sentence
STRONG = 0.5  # a position that gets at least this mean weight names the head's role
SHORT = {"-1": "previous", "+0": "same", "+1": "next"}  # offsets named in a word
BROAD = 0.85  # entropy at least this share of its maximum: the head spreads its weight


@dataclass(frozen=True)
class HeadRole:
    """One head's positional summary.

    Attributes:
        head: the head's index.
        role: what the head does, in words ("previous token", "first token ([CLS])", "broad" (its weight
            spread out), "no fixed position" (where it looks depends on the words)).
        short: the role in a word, for a panel title ("previous", "first", "−2", "broad"; "" for no fixed
            position).
        strength: the mean weight of the position that names the role (None for "broad" and
            "by content").
        offset: the offset (−MAX_OFFSET … MAX_OFFSET) with the largest mean weight.
        offset_score: that offset's mean weight.
        previous, same, first: mean weight on the token before, the token itself, the first token.
        entropy_share: mean entropy of the rows over the most they could have (log of the keys each
            row may see), in [0, 1]; 1: uniform over what it can see.
    """

    head: int
    role: str
    short: str
    strength: float | None
    offset: int
    offset_score: float
    previous: float
    same: float
    first: float
    entropy_share: float


def _offset_name(offset: int) -> str:
    names = {-1: "previous token", 0: "same token", 1: "next token"}
    if offset in names:
        return names[offset]
    return f"{abs(offset)} tokens {'back' if offset < 0 else 'ahead'}"


def head_roles(weights: np.ndarray, tokens: list[str], *, causal: bool) -> list[HeadRole]:
    """Each head's role on this text (see the module docstring).

    Args:
        weights: `(H, T, T)` one layer's attention, T ≥ 2, rows summing to 1.
        tokens: the T tokens (the first and last name the fixed positions: "[CLS]" …).
        causal: whether query i sees only keys 0..i (sets each row's maximal entropy).

    Returns:
        One `HeadRole` per head.
    """
    w = np.asarray(weights, np.float64)
    if w.ndim != 3 or w.shape[1] != w.shape[2] or w.shape[1] < 2 or len(tokens) != w.shape[1]:
        raise SpecError("weights", w.shape, "(H, T, T) with T ≥ 2 and one token per position")
    H, T, _ = w.shape
    offsets = list(range(-min(MAX_OFFSET, T - 1), min(MAX_OFFSET, T - 1) + 1))
    if causal:
        offsets = [d for d in offsets if d <= 0]
    by_offset = np.stack([offset_score(w, d) for d in offsets], -1)  # (H, offsets)
    first = w[:, 1:, 0].mean(-1)
    last = w[:, 1:, -1].mean(-1)
    seen = np.arange(1, T + 1) if causal else np.full(T, T)  # keys each query may see
    entropy = row_entropy(w)[:, 1:]  # (H, T-1)
    share = (entropy / np.log(seen[1:])).mean(-1)
    roles = []
    for h in range(H):
        named = {_offset_name(d): (float(s), f"{d:+d}") for d, s in zip(offsets, by_offset[h], strict=True)}
        named[f"first token ({tokens[0].strip()})"] = (float(first[h]), "first")
        if not causal:
            named[f"last token ({tokens[-1].strip()})"] = (float(last[h]), "last")
        role, (strength, short) = max(named.items(), key=lambda item: item[1][0])
        short = SHORT.get(short, short)
        if strength < STRONG:
            role = "broad" if share[h] >= BROAD else "no fixed position"
            strength, short = None, "broad" if role == "broad" else ""
        best = int(by_offset[h].argmax())
        roles.append(
            HeadRole(
                head=h,
                role=role,
                short=short,
                strength=strength,
                offset=offsets[best],
                offset_score=float(by_offset[h, best]),
                previous=float(offset_score(w, -1)[h]),
                same=float(offset_score(w, 0)[h]),
                first=float(first[h]),
                entropy_share=float(share[h]),
            )
        )
    return roles


# -- the role scan on repeated random tokens ------------------------------------------

ROLES = {
    "previous_token": "weight on the token before (key t − 1)",
    "induction": "weight on the token after the earlier copy of the current token (key t − half + 1)",
    "duplicate_token": "weight on the earlier copy of the current token (key t − half)",
    "first_token": "weight on the first token (key 0): an attention sink",
}
MAX_HALF, MAX_SEQUENCES = 256, 64


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
    monitor: Monitor | None = None,
    device: str = "cpu",
) -> RoleScan:
    """Score every head of `ckpt` for each role in `ROLES`, on `n` repeated random sequences.

    Args:
        half: the length of the random half (the model reads `2·half` tokens).
        monitor: told `(done, n)` after each sequence; a stop ends the scan there (`Stop`).
        device: "cpu" | "gpu" | "auto": where the model runs.
    """
    monitor = watch(monitor)
    ids = repeated_sequences(ckpt, half, n, seed)
    # Every score is a mean over sequences and positions, the same count per sequence, so the mean of
    # per-sequence scores is the scan's: one sequence's attention is alive at a time, never N of them.
    total, first = None, None
    for i, row in enumerate(ids):
        attn = ckpt.run_ids([int(t) for t in row], framework, device=device).attentions.astype(
            np.float64
        )  # (L, H, T, T)
        scores = role_scores(attn[:, :, None])  # one sequence: (L, H, 1, T, T)
        total = scores if total is None else {r: total[r] + scores[r] for r in scores}
        first = attn if first is None else first
        monitor.step(i + 1, n)
    tokens = ckpt.labels([int(t) for t in ids[0]])
    return RoleScan({r: s / n for r, s in total.items()}, ids, first, tokens)


def _check_int(name: str, value, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or not low <= value <= high:
        raise SpecError(name, value, f"an integer {low} … {high}")
