"""A score table's largest terms said in words, as a learner reads them:

"L3.H5's output at the key × the embedding of ' Mary' at the query: +4.20 of the score 6.10."
"""

from __future__ import annotations

import numpy as np

from attnviz.interp.score_table.stream import ATTN_BIAS, EMBED, MLP, POSITION
from attnviz.interp.score_table.table import BIAS, ScoreParts


def part_words(name: str, token: str) -> str:
    """One part's name in words; `token` is the token at that side's position."""
    if name == EMBED:
        return f"the embedding of {token!r}"
    if name == POSITION:
        return "the position embedding"
    if name == BIAS:
        return "the norm's shift and the projection's bias"
    layer, what = name.split(".", 1)
    return {MLP: f"{layer}'s MLP output", ATTN_BIAS: f"{layer}'s output-projection bias"}.get(
        what, f"{name}'s output"
    )


def term_words(parts: ScoreParts, a: int, b: int) -> str:
    """Term (query part `a`, key part `b`) of `parts.table` as a sentence."""
    key = part_words(parts.key_parts[b], parts.tokens[parts.key])
    query = part_words(parts.query_parts[a], parts.tokens[parts.query])
    return (
        f"{key} at the key × {query} at the query: {parts.table[a, b]:+.2f} of the score {parts.score:.2f}."
    )


def largest(parts: ScoreParts, k: int = 5) -> list[str]:
    """The `k` terms of largest size (either sign), largest first, each as a sentence."""
    order = np.argsort(-np.abs(parts.table), axis=None, kind="stable")[:k]
    return [term_words(parts, *np.unravel_index(flat, parts.table.shape)) for flat in order]


REST = "rest"


def condensed(table: np.ndarray, query_parts: list[str], key_parts: list[str], k: int = 16) -> tuple:
    """The table cut to its `k` query parts and `k` key parts of largest total size (|row| and
    |column| sums of |terms|), the others folded into a "rest" row and column, so the cut table
    still sums to the whole: `(query names, key names, (≤ k + 1, ≤ k + 1) table)`."""
    rows, cols = _largest(np.abs(table).sum(1), k), _largest(np.abs(table).sum(0), k)
    out = _fold(_fold(table, rows, 0), cols, 1)
    return _names(query_parts, rows), _names(key_parts, cols), out


def _names(names: list[str], kept: list[int]) -> list[str]:
    return [names[i] for i in kept] + ([REST] if len(kept) < len(names) else [])


def _largest(size: np.ndarray, k: int) -> list[int]:
    """The indices of the `k` largest `size`s, in their original order."""
    return sorted(np.argsort(-size, kind="stable")[:k].tolist())


def _fold(table: np.ndarray, kept: list[int], axis: int) -> np.ndarray:
    """`table` with only `kept` along `axis`, plus one slice summing the rest (if any)."""
    taken = np.take(table, kept, axis=axis)
    if len(kept) == table.shape[axis]:
        return taken
    rest = np.take(table, [i for i in range(table.shape[axis]) if i not in set(kept)], axis=axis)
    return np.concatenate([taken, rest.sum(axis, keepdims=True)], axis=axis)
