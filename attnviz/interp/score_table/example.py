"""The worked example: an induction head's score taken apart (Olsson et al., 2022, "In-context
Learning and Induction Heads").

On a text that repeats itself, an induction head at a token A of the second copy attends to the
token after A's first occurrence. The story the table should tell: the key side is carried by a
previous-token head's output at the key (it wrote "the token before me was A" there), the query side
by A itself — its embedding, or what the first MLP makes of it. `induction_target` says which key the
story predicts; `partner` finds, among the heads a role scan ranks as previous-token heads, the one
whose output at the key gives the score most.
"""

from __future__ import annotations

from attnviz.interp.score_table.stream import head_name
from attnviz.interp.score_table.table import ScoreParts

# Written for attnviz: made-up names split into several tokens, then the same words again.
EXAMPLE_TEXT = (
    "The keeper of the lighthouse, Elias Marrowby, rowed to Quillfeather Island. "
    "The keeper of the lighthouse, Elias Marrowby, rowed to Quillfeather"
)


def induction_target(ids: list[int], query: int) -> int | None:
    """The key an induction head at `query` should pick: the position after the latest earlier
    occurrence of the query's token (None if the token has not occurred before)."""
    earlier = [j for j in range(query) if ids[j] == ids[query]]
    return earlier[-1] + 1 if earlier else None


def partner(parts: ScoreParts, previous: list[tuple[int, int]]) -> tuple[str, float] | None:
    """Of the `previous` heads (layer, head) — a role scan's previous-token heads — that write into
    this score's key side, the one whose output at the key gives the score most: its name and that
    share (the sum of its key column); None if none of them comes before the layer."""
    shares = {name: float(parts.table[:, parts.key_parts.index(name)].sum()) for name in
              (head_name(a, b) for a, b in previous) if name in parts.key_parts}  # fmt: skip
    if not shares:
        return None
    best = max(shares, key=shares.get)
    return best, shares[best]


def example_query(ids: list[int]) -> int:
    """The query of the worked example: the second-to-last token (its successor's first occurrence
    is the key the story predicts)."""
    return len(ids) - 2 if len(ids) >= 2 else 0
