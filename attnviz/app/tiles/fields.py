"""The FlashAttention tiles screen's number fields, each declared once (`attnviz.app.frame.links.Field`):
its widgets, the link guard's rows and the page's notes read them. The layer, head and tile are bounded
by the chosen model and tiling: the page narrows `high` to them."""

from __future__ import annotations

from attnviz.app.frame.links import Field
from attnviz.pretrained import MAX_LAYERS

LAYER = Field("tiles.layer", "Layer", 0, MAX_LAYERS, 3)
HEAD = Field("tiles.head", "Head", 0, 1023, 0)
BQ = Field("tiles.bq", "Queries per block", 1, 64, 4)
BK = Field("tiles.bk", "Keys per block", 1, 64, 4)
STEP = Field("tiles.step", "Tile, in the order the pass visits them", 1, 10**6, 1)
ALL = (LAYER, HEAD, BQ, BK, STEP)
