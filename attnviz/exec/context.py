"""What a task sees, the same on every engine: `Context`, and `run`, which turns whatever the task
does into an outcome that can travel back to the server.

A task is a module-level function whose first argument is the context:

    def sweep(ctx, source, clean, corrupted, answer, wrong, framework):
        ckpt = load(ctx, source, framework)
        return patching.sweep(ckpt, ..., progress=ctx.report, stop=ctx.stopped)

- `ctx.report(done, total, partial=None)`: progress; `partial` (anything picklable: a training
  snapshot, a row of results) is kept, in order, by the server's `Handle`.
- `ctx.stopped()`: True once the task should end (a Stop, a closed tab, its time limit); check
  it between layers or steps and return what is done.
- `ctx.step(done, total)`: report, then end the task here (`StopRequested`) if it should stop —
  the `progress` callback for library calls that take one (`lens.read`, `generate`, …).
- `with ctx.unbudgeted():` loading a framework or a checkpoint, which the task's memory budget
  does not count (the checkpoint cache has its own bound).
"""

from __future__ import annotations

import contextlib
import pickle
import traceback
from collections.abc import Callable, Iterator
from typing import Any

from attnviz.errors import SpecError
from attnviz.exec.errors import OverMemory, Stopped, TaskError, TaskFailed


class StopRequested(BaseException):
    """Raised by `Context.step` to end a task that was asked to stop. A `BaseException`, so a
    library's `except Exception` does not swallow it."""


class Context:
    """The task's side of its handle. Engines subclass it (`_send`, `_stop_flag`); this base class
    runs a task in process (tests, a notebook): reports go to `on_report`, `stop()` asks it to stop."""

    def __init__(self, on_report: Callable[[int, int | None, Any], None] | None = None):
        self._on_report = on_report
        self._stop = False

    def report(self, done: int, total: int | None = None, partial: Any = None) -> None:
        """Progress: `done` of `total` units (steps, layers, heads), and optionally a partial result."""
        self._send(int(done), None if total is None else int(total), partial)

    def stopped(self) -> bool:
        """True once the task should end (asked to stop, or over its time limit)."""
        return self._stop_flag()

    def step(self, done: int, total: int | None = None) -> None:
        """`report(done, total)`, then raise `StopRequested` if the task should stop."""
        self.report(done, total)
        if self.stopped():
            raise StopRequested

    @contextlib.contextmanager
    def unbudgeted(self) -> Iterator[None]:
        """Work inside is not counted against the task's memory budget (a framework or a checkpoint
        loading: kept by the worker for later tasks, bounded by its own cache)."""
        yield

    def stop(self) -> None:
        self._stop = True

    def _send(self, done: int, total: int | None, partial: Any) -> None:
        if self._on_report is not None:
            self._on_report(done, total, partial)

    def _stop_flag(self) -> bool:
        return self._stop


# An outcome travels from the worker to the server: (True, value) or (False, TaskError).
Outcome = tuple[bool, Any]


def run(task: Callable, ctx: Context, args: tuple, kwargs: dict, budget_mb: float | None = None) -> Outcome:
    """Call `task(ctx, *args, **kwargs)`; its value, or what ended it as a `TaskError`.

    Args:
        budget_mb: the memory budget in force (None: none), named by `OverMemory` when the task
            fails for lack of memory.
    """
    try:
        return True, task(ctx, *args, **kwargs)
    except StopRequested:
        return False, Stopped()
    except TaskError as error:  # a task that ran another task
        return False, error
    except Exception as error:  # whatever the task raised comes back as data, with its message
        if budget_mb is not None and out_of_memory(error):
            return False, OverMemory(budget_mb, f"{type(error).__name__}: {str(error)[:160]}")
        return False, failure(error)


def pack(outcome: Outcome) -> bytes:
    """An outcome pickled in the worker, so that a value that cannot travel is said in its place."""
    try:
        return pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as error:
        message = f"the task's result cannot be sent back: {type(error).__name__}: {error}"
        return pickle.dumps((False, failure(TypeError(message))), protocol=pickle.HIGHEST_PROTOCOL)


def failure(error: BaseException) -> TaskFailed:
    """`error` as a `TaskFailed`: its message (its class's name when it has none), and a
    `SpecError`'s field and what is allowed."""
    message = str(error) or type(error).__name__
    field = allowed = None
    if isinstance(error, SpecError):
        field, allowed = str(error.field), str(error.allowed)
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    return TaskFailed(message, type(error).__name__, field, allowed, text)


# What the frameworks raise when an allocation fails (checked on this project's machine under
# RLIMIT_DATA: numpy MemoryError, torch RuntimeError "DefaultCPUAllocator: can't allocate memory",
# TensorFlow ResourceExhaustedError "OOM when allocating tensor").
_OOM_TYPES = ("MemoryError", "ResourceExhaustedError", "OutOfMemoryError")
_OOM_TEXTS = ("can't allocate memory", "Cannot allocate memory", "OOM when allocating")


def out_of_memory(error: BaseException) -> bool:
    """Whether `error`, or an error it was raised from, is a failed allocation."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        text = str(error)
        if (
            isinstance(error, MemoryError)
            or type(error).__name__ in _OOM_TYPES
            or any(t in text for t in _OOM_TEXTS)
        ):
            return True
        error = error.__cause__ or error.__context__
    return False
