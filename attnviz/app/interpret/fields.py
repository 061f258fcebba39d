"""The Interpretability screen's number fields, each declared once (`attnviz.app.frame.links.Field`): its
widgets and the link guard's rows read them. `interp.k` is bounded by the model's heads: the page
narrows `high` to half of them (at most 16). The score parts' query and key positions are not declared
here yet: their boxes have no upper bound (the text's length), the guard's rows say 0 … 4095."""

from __future__ import annotations

from attnviz.app.frame.links import Field

HALF = Field("interp.half", "Random tokens per half", 2, 64, 16)
N = Field("interp.n", "Sequences", 1, 8, 4)
SEED = Field("interp.seed", "Seed", 0, 10_000, 0)
K = Field("interp.k", "Heads to ablate (k)", 1, 16, 3)
ALL = (HALF, N, SEED, K)
