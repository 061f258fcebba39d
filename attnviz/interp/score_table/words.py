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
