"""The lab's warm-up, which a server's workers run before any visitor (`schedule.warm_up`, given to
the engine by `attnviz.app.frame.door.warm`; the engine's side: tests/exec/test_warm_up.py): the
lab's own task, trained for a few steps in each framework it is given."""

from __future__ import annotations

from attnviz.training import schedule


def test_the_warm_up_trains_the_labs_task_in_each_framework():
    assert schedule.warm_up(("torch",)) == {"torch": schedule.WARM_UP.steps}
    assert schedule.warm_up(()) == {}
