"""The Compare models screen's number fields (the role scan's), each declared once
(`attnviz.app.frame.links.Field`): its widgets, the link guard's rows and the page's notes read them."""

from __future__ import annotations

from attnviz.app.frame.links import Field

HALF = Field("models.half", "Random tokens per half", 2, 64, 16)
N = Field("models.n", "Sequences", 1, 8, 4)
SEED = Field("models.seed", "Seed", 0, 10_000, 0)
ALL = (HALF, N, SEED)
