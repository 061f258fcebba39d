"""The Speech screen's number fields, each declared once (`attnviz.app.frame.links.Field`): its widgets,
the link guard's rows and the page's notes read them. Whisper's widest is large's 32 layers × 20 heads
(tiny: 4 × 6); the page narrows `high` to the checkpoint's, and the layer's default (the last) with it."""

from __future__ import annotations

from attnviz.app.frame.links import Field

LAYER = Field("speech.layer", "Layer", 0, 31, 31)
HEAD = Field("speech.head", "Head", 0, 19, 0)
ALL = (LAYER, HEAD)
