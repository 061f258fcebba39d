"""What each head does on one text: the positions it attends to, named.

A head's attention on a sentence is summarised by the mean weight its queries give
to a position relative to themselves (an *offset*: −1 the token before, 0 the token
itself, +1 the token after) and to fixed positions (the first and the last token).
The query at position 0 is left out of every score: it has no token before it, and
in a decoder it can only attend to itself. Scores follow the positional roles of
Clark et al., 2019 ("What does BERT look at?") and TransformerLens's
previous-token / first-token scores (`attnviz.interp.roles` scores them on repeated
random tokens; these are on the visitor's own text).

Shapes: H heads, T tokens; `weights (H, T, T)`, rows sum to 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnviz.errors import SpecError

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


def offset_score(weights: np.ndarray, offset: int) -> np.ndarray:
    """Mean weight from query i (i ≥ 1) to key i + offset, over the queries that have that key; `(H,)`."""
    H, T, _ = weights.shape
    rows = [i for i in range(1, T) if 0 <= i + offset < T]
    if not rows:
        return np.zeros(H)
    rows_ = np.array(rows)
    return weights[:, rows_, rows_ + offset].mean(-1)


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
    logs = np.log(np.where(w > 0, w, 1.0))
    entropy = -(w * logs).sum(-1)[:, 1:]  # (H, T-1)
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
