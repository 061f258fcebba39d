"""The Interpretability screen's score split as a task (`attnviz.interp.score_table`), kept out of
`tasks.py` while the tasks move to their domains: the same convention (a `Context` first, a
checkpoint by its name or allowed folder, loaded in the worker through `tasks.checkpoint`)."""

from __future__ import annotations

from attnviz.exec.context import Context
from attnviz.exec.tasks import checkpoint
from attnviz.interp import score_table


def score_row(
    ctx: Context,
    source: str,
    text: str,
    layer: int,
    head: int,
    query: int,
    framework: str = "torch",
    key: int | None = None,
) -> score_table.RowParts:
    """`score_table.score_row`: one head's row at `query`, the score at `key` split into parts."""
    ckpt = checkpoint(ctx, source, framework)
    ctx.step(0, 1)
    row = score_table.score_row(ckpt, text, layer, head, query, framework, key=key)
    ctx.report(1, 1)
    return row
