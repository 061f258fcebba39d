"""The one way long work reports progress and is asked to stop: a `Monitor`.

Every library function that loops over layers, heads, sequences, tokens, tiles, steps or measured
rows takes `monitor: Monitor | None = None` (keyword-only) and talks to it in the same three calls:

    monitor = watch(monitor)              # None: a silent monitor that never stops
    for layer in range(L):
        monitor.step(layer, L)            # progress, then `Stop` raised if it should stop
        ...
    monitor.report(L, L, partial)         # progress with a partial result (a row, a snapshot)
    if monitor.stopped(): return so_far   # where the work keeps what it did instead

- `report(done, total=None, partial=None)`: `done` of `total` units, and optionally a partial
  result (anything picklable) that a watcher keeps in order;
- `stopped()`: True once the work should end (a Stop button, a closed tab, a time limit);
- `step(done, total=None)`: `report`, then raise `Stop` if `stopped()` — for loops that keep
  nothing when stopped;
- `with monitor.loading():` a framework or a checkpoint loading, work kept for later calls that a
  memory budget does not count (a worker's budget pauses; here it does nothing).

`Stop` is the one stop exception: a `BaseException`, so an `except Exception` in between does not
swallow it. The engine gives a task it runs a monitor whose reports cross to the server and whose
`stopped()` reads the server's stop; in a notebook `Monitor(on_report)` prints or collects the
reports, and `monitor.stop()` asks the work to end. The library imports this module alone (it
imports nothing): the protocol is the engine's, no engine need be running.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any


class Stop(BaseException):
    """Raised by `Monitor.step` to end work that was asked to stop."""


class Monitor:
    """Progress and stop for one piece of work. This base class runs in process: reports go to
    `on_report(done, total, partial)`, `stop()` asks the work to end. The execution layer's
    engines subclass it (`_send`, `_stop_flag`, `loading`)."""

    def __init__(self, on_report: Callable[[int, int | None, Any], None] | None = None):
        self._on_report = on_report
        self._stop = False

    def report(self, done: int, total: int | None = None, partial: Any = None) -> None:
        """Progress: `done` of `total` units (steps, layers, heads), and optionally a partial result."""
        self._send(int(done), None if total is None else int(total), partial)

    def stopped(self) -> bool:
        """True once the work should end (asked to stop, or over its time limit)."""
        return self._stop_flag()

    def step(self, done: int, total: int | None = None) -> None:
        """`report(done, total)`, then raise `Stop` if the work should stop."""
        self.report(done, total)
        if self.stopped():
            raise Stop

    @contextlib.contextmanager
    def loading(self) -> Iterator[None]:
        """Work inside loads something kept for later (a framework, a checkpoint): not counted
        against a memory budget where one is in force."""
        yield

    def stop(self) -> None:
        """Ask the work to end (`stopped()` is True from now on)."""
        self._stop = True

    def share(self, before: int, total: int) -> Monitor:
        """A monitor for one part of this work: its `done` counted after `before` units, out of
        `total` in all (two role scans told as one count), its stop this one's."""
        return _Share(self, before, total)

    def _send(self, done: int, total: int | None, partial: Any) -> None:
        if self._on_report is not None:
            self._on_report(done, total, partial)

    def _stop_flag(self) -> bool:
        return self._stop


class _Share(Monitor):
    def __init__(self, whole: Monitor, before: int, total: int):
        super().__init__()
        self._whole, self._before, self._total = whole, before, total

    def _send(self, done: int, total: int | None, partial: Any) -> None:
        self._whole.report(self._before + done, self._total, partial)

    def _stop_flag(self) -> bool:
        return self._whole.stopped()

    @contextlib.contextmanager
    def loading(self) -> Iterator[None]:
        with self._whole.loading():
            yield


def watch(monitor: Monitor | None) -> Monitor:
    """`monitor`, or a silent one that never stops where the caller gave none."""
    return monitor if monitor is not None else Monitor()
