"""The Pretrained screen's number fields, each declared once (`attnviz.app.frame.links.Field`): its
widgets, the link guard's rows and the page's link notes read them."""

from __future__ import annotations

from attnviz.app.frame.links import Field
from attnviz.pretrained import TEMPERATURE

K = Field("pre.k", "How many predictions", 1, 20, 10)
TEMPERATURE_FIELD = Field(
    "pre.temperature", "Temperature (0: always the most likely)", 0.0, TEMPERATURE[1], 1.0,
    step=None, widget_step=TEMPERATURE[0],  # the library checks the value; the slider moves by its lowest
)  # fmt: skip
NEW_TOKENS = Field("pre.new_tokens", "New tokens", 1, 20, 8)  # the page's limit (the library allows more)
SEED = Field("pre.seed", "Seed", 0, 10**6, 0)
# "show the window at N tokens": a local layer's window (Gemma 3: 512; the family's default 4096), 4 by
# default: a window a short sentence already overflows
WINDOW = Field("pre.window", "N (tokens)", 1, 4096, 4)
ALL = (K, TEMPERATURE_FIELD, NEW_TOKENS, SEED, WINDOW)
