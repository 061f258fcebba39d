"""The one monitor protocol (attnviz.exec.monitor), in process: what a library loop sees."""

from __future__ import annotations

import pytest

from attnviz.exec.monitor import Monitor, Stop, watch


def test_reports_reach_the_watcher_and_step_raises_the_one_stop_once_asked():
    seen = []
    monitor = Monitor(lambda done, total, partial: seen.append((done, total, partial)))
    monitor.report(1, 3, "row")
    monitor.step(2, 3)
    assert seen == [(1, 3, "row"), (2, 3, None)] and not monitor.stopped()
    monitor.stop()
    with pytest.raises(Stop):
        monitor.step(3, 3)
    assert seen[-1] == (3, 3, None)  # reported, then stopped
    assert not isinstance(Stop(), Exception), "an `except Exception` between must not swallow it"


def test_a_share_counts_after_the_parts_before_and_shares_the_stop():
    seen = []
    whole = Monitor(lambda done, total, _: seen.append((done, total)))
    first, second = whole.share(0, 8), whole.share(4, 8)
    for part in (first, second):
        for i in range(1, 5):
            part.step(i, 4)
    assert seen == [(i, 8) for i in range(1, 9)]
    whole.stop()
    assert second.stopped() and first.stopped()


def test_watch_gives_a_silent_monitor_that_never_stops():
    silent = watch(None)
    silent.report(1, 2, "anything")
    silent.step(2, 2)
    with silent.loading():
        pass
    assert not silent.stopped()
    mine = Monitor()
    assert watch(mine) is mine
