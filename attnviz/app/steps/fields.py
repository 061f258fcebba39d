"""The Step by step screen's number fields, each declared once (`attnviz.app.frame.links.Field`): its
widgets, the link guard's rows and the page's notes read them. Their range follows the configuration
(the heads, batch and length of the spec): the page narrows `high`, and the guard checks only that the
value is a whole number (`link_values.PAGE_RANGES`)."""

from __future__ import annotations

from attnviz.app.frame.links import Field

HEAD = Field("steps.head", "Head", 0, 63, 0)
BATCH = Field("steps.batch", "Batch item", 0, 63, 0)
POS = Field("steps.pos", "Query position", 0, 4095, 3)
ALL = (HEAD, BATCH, POS)
