"""The Timing screen's number field, declared once (`attnviz.app.frame.links.Field`): its widget, the link
guard's row and the page's note read it."""

from __future__ import annotations

from attnviz.app.frame.links import Field

REPEATS = Field("timing.repeats", "Repeats", 3, 50, 7)
ALL = (REPEATS,)
