"""The Lesson screen's number field in the link, declared once (`attnviz.app.frame.links.Field`): the
basics lesson's step before deep links (`?lesson.step=3`, read by `attnviz.app.lesson.state`). It has no
widget (the steps are buttons); the link guard's row and its widest range come from here."""

from __future__ import annotations

from attnviz import lessons
from attnviz.app.frame.links import Field

OLD_STEP = Field("lesson.step", "Step", 1, len(lessons.STEPS) + 1, 1)  # the last: the summary
ALL = (OLD_STEP,)
