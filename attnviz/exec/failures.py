"""What can end a task other than its value, as data: each error names what failed.

`Handle.result()` raises one of these; `str(error)` is the sentence a page shows, and the
attributes carry the numbers so a page never parses the text:

- `TaskFailed`: the task raised; its own message, its type's name, and `field` / `allowed`
  when it was a `SpecError` (a bad input named by the library).
- `WorkerStopped`: the worker process ended under it (killed from outside, crashed): "the worker
  stopped (signal 9)".
- `OverTime`: it ran past its time limit and was ended: "over the time limit of 60 s".
- `OverMemory`: it asked for more than its memory budget: "over the memory budget of 512 MiB".
- `Stopped`: `Handle.stop()` ended it (a Stop button, a closed tab).
- `NoWorker`: no worker was free within the queue's wait limit.

`Busy` is raised by `submit` itself (nothing is queued): the server runs as many trainings as
it allows.
"""

from __future__ import annotations

import signal

from attnviz.errors import SpecError


class TaskError(Exception):
    """A task ended without a value; the message says why, in a page's words."""


class TaskFailed(TaskError):
    """The task raised. `type_name` its exception's class; `field`, `allowed` as a `SpecError`'s
    (None otherwise); `remote_traceback` the worker's traceback text, for the operator's log."""

    def __init__(
        self,
        message: str,
        type_name: str,
        field: str | None = None,
        allowed: str | None = None,
        remote_traceback: str = "",
    ):
        super().__init__(message)
        self.type_name, self.field, self.allowed = type_name, field, allowed
        self.remote_traceback = remote_traceback

    def __reduce__(self):
        return type(self), (str(self), self.type_name, self.field, self.allowed, self.remote_traceback)


def _exit_text(exitcode: int | None) -> str:
    """`-9` → "signal 9, SIGKILL"; `1` → "exit code 1"; None → "exit status unknown"."""
    if exitcode is None:
        return "exit status unknown"
    if exitcode < 0:
        try:
            return f"signal {-exitcode}, {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"signal {-exitcode}"
    return f"exit code {exitcode}"


class WorkerStopped(TaskError):
    """The worker ended while the task ran; `exitcode` as `multiprocessing.Process.exitcode`
    (−N: signal N), or `detail` where the engine reports it in words (a Dask worker)."""

    def __init__(self, exitcode: int | None = None, detail: str | None = None):
        self.exitcode, self.detail = exitcode, detail
        super().__init__(f"the worker stopped ({detail or _exit_text(exitcode)})")

    def __reduce__(self):
        return type(self), (self.exitcode, self.detail)


class OverTime(TaskError):
    """The task ran past `seconds` and was ended."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        super().__init__(f"over the time limit of {seconds:g} s")

    def __reduce__(self):
        return type(self), (self.seconds,)


class OverMemory(TaskError):
    """The task asked for more than `budget_mb` MiB beyond what its worker held when it started."""

    def __init__(self, budget_mb: float, detail: str = ""):
        self.budget_mb, self.detail = budget_mb, detail
        super().__init__(f"over the memory budget of {budget_mb:g} MiB" + (f" ({detail})" if detail else ""))

    def __reduce__(self):
        return type(self), (self.budget_mb, self.detail)


class Stopped(TaskError):
    """`Handle.stop()` ended the task; `forced` when its worker had to be killed (it did not stop
    by itself within the grace period)."""

    def __init__(self, forced: bool = False):
        self.forced = forced
        super().__init__("stopped" + (" (its worker was ended: it did not stop in time)" if forced else ""))

    def __reduce__(self):
        return type(self), (self.forced,)


class NoWorker(TaskError):
    """No worker was free within `seconds`."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        super().__init__(f"no worker was free within {seconds:g} s; the server is busy, try again")

    def __reduce__(self):
        return type(self), (self.seconds,)


class Busy(SpecError):
    """`submit` refused a training: `running` of at most `limit` trainings run at once."""

    def __init__(self, running: int, limit: int):
        self.field, self.value, self.allowed = "runs", running, f"at most {limit} trainings at once"
        self.running, self.limit = running, limit
        ValueError.__init__(
            self,
            f"The server is training {running} run{'s' * (running != 1)} already, its limit (the smaller of "
            f"ATTNVIZ_TRAIN_MAX_RUNS and ATTNVIZ_MAX_CONCURRENT_RUNS − 1: {limit}). Press Start again when "
            "one ends.",
        )

    def __reduce__(self):
        return type(self), (self.running, self.limit)
