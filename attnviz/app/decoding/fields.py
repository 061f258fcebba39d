"""The Decoding screen's number fields, each declared once (`attnviz.app.frame.links.Field`): its widgets,
the link guard's rows and the page's notes read them. The new tokens, layer, head and step are bounded
by the chosen model and generation: the page narrows `high` to them."""

from __future__ import annotations

from attnviz.app.frame.links import Field
from attnviz.pretrained import MAX_LAYERS, TEMPERATURE

NEW_TOKENS = Field(
    "decoding.new_tokens", "New tokens", 1, 20, 8
)  # each step's rows are kept for the step slider
TEMPERATURE_FIELD = Field(
    "decoding.temperature", "Temperature (0: always the most likely)", 0.0, TEMPERATURE[1], 0.0,
    step=None, widget_step=TEMPERATURE[0],  # the library checks the value; the slider moves by its lowest
)  # fmt: skip
SEED = Field("decoding.seed", "Seed", 0, 10**6, 0)
LAYER = Field("decoding.layer", "Layer", 0, MAX_LAYERS, 3)
HEAD = Field("decoding.head", "Query head", 0, 1023, 0)
STEP = Field("decoding.step", "Step: the new token", 1, NEW_TOKENS.high, 1)
# the streaming section (attnviz/app/decoding/sinks.py): tokens of the bundled text read, the window
SINK_TOKENS = Field("decoding.sinks.tokens", "Tokens read", 32, 1024, 512, widget_step=32)
SINK_WINDOW = Field("decoding.sinks.window", "Window W", 8, 512, 128, widget_step=8)
ALL = (NEW_TOKENS, TEMPERATURE_FIELD, SEED, LAYER, HEAD, STEP, SINK_TOKENS, SINK_WINDOW)
