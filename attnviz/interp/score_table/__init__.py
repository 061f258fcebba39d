"""Why a head attends where it does: one pre-softmax score (or a whole row) taken apart, exactly,
into (query part × key part) terms of the residual stream (`table`), the stream's parts read from
one run (`stream`), and the largest terms said in words (`words`).

    parts = score_parts(ckpt, text, layer, head, query, key, "torch")
    parts.table.sum() ≈ parts.score
"""

from attnviz.interp.score_table.stream import head_name
from attnviz.interp.score_table.table import RowParts, ScoreParts, score_parts, score_row

__all__ = ["RowParts", "ScoreParts", "head_name", "score_parts", "score_row"]
