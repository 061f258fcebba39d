"""`Handle`: the server's view of one submitted task — its progress, its partial results, stop,
and its value or the error that ended it. The same for every engine; an engine feeds it through
the underscored methods."""

from __future__ import annotations

import itertools
import pickle
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from attnviz.exec.failures import OverTime, Stopped, TaskError, WorkerStopped
from attnviz.exec.limits import Limits

QUEUED, RUNNING, DONE = "queued", "running", "done"
_NUMBERS = itertools.count(1)


@dataclass(frozen=True)
class Progress:
    """A task's progress now.

    Attributes:
        state: "queued" (waiting for a worker), "running" or "done".
        done, total: the latest units reported (`total` None until the task says).
        partials: every partial result reported so far, in order.
        elapsed_s: seconds it has been running (0 while queued; fixed once it ended).
        worker: where it runs (a process id, a Dask worker's address), None while queued.
    """

    state: str
    done: int
    total: int | None
    partials: tuple
    elapsed_s: float
    worker: Any

    @property
    def fraction(self) -> float:
        """`done / total` in [0, 1] (0 while the total is unknown): for a progress bar."""
        return min(1.0, max(0.0, self.done / self.total)) if self.total else 0.0


class Handle:
    """One task: `progress()`, `wait(timeout)`, `stop()`, `done()`, `result(timeout)`, `error()`.

    Thread-safe: an engine's threads feed it while a page's script thread reads it.
    """

    def __init__(
        self,
        name: str,
        limits: Limits,
        training: bool = False,
        affinity: str | None = None,
        quick: bool = False,
    ):
        self.name, self.limits, self.training = name, limits, training
        self.quick = quick  # a task of well under a second: a free worker takes it before the others
        self.affinity = affinity  # the checkpoint it loads: a free worker that has it loaded runs it
        self.number = next(_NUMBERS)
        self._cond = threading.Condition()
        self._version = self._seen = 0
        self._state, self._done, self._total = QUEUED, 0, None
        self._partials: list = []
        self._worker: Any = None
        self._submitted, self._started, self._ended = time.monotonic(), None, None
        self._value: Any = None
        self._error: TaskError | None = None
        self._stop_asked = False
        self.grace_s = limits.grace_s  # how long a stopped task may take to end by itself (`stop`)
        self._on_stop: Callable[[], None] | None = None  # the engine's, to act on a stop at once

    def __repr__(self) -> str:
        return f"<Handle {self.number} {self.name} {self._state}>"

    # -- what a page calls ---------------------------------------------------------------

    def progress(self) -> Progress:
        """The latest progress (and marks it seen, for `wait`)."""
        with self._cond:
            self._seen = self._version
            return Progress(
                self._state, self._done, self._total, tuple(self._partials), self._running_s(), self._worker
            )

    def wait(self, timeout: float) -> bool:
        """Wait at most `timeout` seconds for something new since the last `progress()` or `wait()`
        (a report, the start, the end); True if something came."""
        with self._cond:
            fresh = self._cond.wait_for(lambda: self._version != self._seen, timeout)
            self._seen = self._version
            return fresh

    def stop(self, grace_s: float | None = None) -> None:
        """Ask the task to stop; returns at once. It stops within the grace period (by itself, or
        its worker is killed); `result()` then gives what it returned, or `Stopped`.

        Args:
            grace_s: that period; default its limits' `grace_s`. A Stop whose visitor waits for
                what the task has so far gives it longer to finish its last step (a generation's
                final pass over the whole text) than a closed tab, whose task nobody waits for.
                The first stop asked decides; the time limit still bounds the task.
        """
        with self._cond:
            if self._state == DONE or self._stop_asked:
                return
            self._stop_asked = True
            self.grace_s = self.limits.grace_s if grace_s is None else float(grace_s)
            on_stop = self._on_stop
        if on_stop is not None:
            on_stop()

    def stop_when_gone(
        self, alive: Callable[[], bool], after_s: float = 1.5, every_s: float = 0.25
    ) -> Handle:
        """Stop the task once `alive()` has said False for `after_s` seconds — its visitor's tab
        closed or session expired; a tab that reconnects sooner keeps its task. A page passes its
        session's liveness (`functools.partial(session_alive, session_id())`). Checked every
        `every_s` by a thread of its own that ends with the task; returns the handle."""

        def watch() -> None:
            gone_since = None
            while not self._wait_done(every_s):
                try:
                    here = alive()
                except Exception:  # cannot tell: the time limit still ends the task
                    here = True
                now = time.monotonic()
                gone_since = None if here else gone_since or now
                if gone_since is not None and now - gone_since >= after_s:
                    self.stop()
                    return

        threading.Thread(target=watch, name=f"attnviz-watch-{self.number}", daemon=True).start()
        return self

    @property
    def stop_asked(self) -> bool:
        return self._stop_asked

    def done(self) -> bool:
        return self._state == DONE

    def result(self, timeout: float | None = None) -> Any:
        """The task's value, waiting up to `timeout` seconds (None: until it ends, which its
        limits bound).

        Raises:
            TaskError: what ended it (`TaskFailed`, `WorkerStopped`, `OverTime`, `OverMemory`,
                `Stopped`, `NoWorker`).
            TimeoutError: it had not ended within `timeout`.
        """
        with self._cond:
            if not self._cond.wait_for(lambda: self._state == DONE, timeout):
                raise TimeoutError(f"{self.name}: not done within {timeout:g} s")
            if self._error is not None:
                raise self._error
            return self._value

    def _wait_done(self, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._state == DONE, timeout)

    def error(self) -> TaskError | None:
        """What ended the task, without raising (None while running or after a value)."""
        return self._error

    # -- what an engine calls ------------------------------------------------------------

    def _set_stopper(self, on_stop: Callable[[], None]) -> None:
        with self._cond:
            self._on_stop = on_stop

    def _start(self, worker: Any) -> None:
        with self._cond:
            self._state, self._worker, self._started = RUNNING, worker, time.monotonic()
            self._bump()

    def _report(self, done: int, total: int | None, partial: Any) -> None:
        with self._cond:
            self._done, self._total = done, total
            if partial is not None:
                self._partials.append(partial)
            self._bump()

    def _finish(self, value: Any = None, error: TaskError | None = None) -> None:
        with self._cond:
            if self._state == DONE:
                return
            self._state, self._value, self._error = DONE, value, error
            self._ended = time.monotonic()
            self._on_stop = None
            self._bump()

    def _end_reason(self) -> str | None:
        """Why the running task must end now: "stop", "time" (over its limit), or None."""
        if self._stop_asked:
            return "stop"
        if self._running_s() > self.limits.seconds:
            return "time"
        return None

    def _end(self, packed: bytes, reason: str | None) -> tuple[Any, TaskError | None]:
        """`(value, error)` from a task's packed outcome and why it was asked to end: over its
        time limit it is `OverTime` even when it returned what it had; stopped, its value if it
        returned one."""
        ok, value = pickle.loads(packed)
        if reason == "time":
            return None, OverTime(self.limits.seconds)
        return (value, None) if ok else (None, value)

    def _lost(self, reason: str | None, exitcode: int | None = None, detail: str | None = None) -> TaskError:
        """The error for a worker that ended under the task: killed by its engine (a stop, the
        time limit) or from outside."""
        if reason == "stop":
            return Stopped(forced=True)
        if reason == "time":
            return OverTime(self.limits.seconds)
        return WorkerStopped(exitcode, detail)

    def _running_s(self) -> float:
        """Seconds since it started running (0 while queued), until it ended."""
        if self._started is None:
            return 0.0
        return (self._ended or time.monotonic()) - self._started

    def _queued_s(self) -> float:
        return time.monotonic() - self._submitted

    def _bump(self) -> None:
        self._version += 1
        self._cond.notify_all()
