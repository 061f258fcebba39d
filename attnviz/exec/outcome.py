"""A task's outcome, the same on every engine: `run` calls the task with its monitor and turns
whatever it does into an outcome that can travel back to the server.

A task is any function importable by name (a library function, a domain's task), called with the
arguments given to `submit`; when its signature names a `monitor` parameter, the engine passes its
`attnviz.exec.monitor.Monitor` there (reports cross to the server's `Handle`, `stopped()` reads its
stop, `loading()` pauses the worker's memory budget):

    def sweep(source, clean, corrupted, answer, wrong, framework, *, monitor=None):
        ckpt = pretrained.open_source(source, framework, monitor=monitor)
        return patching.sweep(ckpt, ..., monitor=monitor)
"""

from __future__ import annotations

import inspect
import pickle
import traceback
from collections.abc import Callable
from typing import Any

from attnviz.errors import SpecError
from attnviz.exec.failures import OverMemory, Stopped, TaskError, TaskFailed
from attnviz.exec.monitor import Monitor, Stop

# An outcome travels from the worker to the server: (True, value) or (False, TaskError).
Outcome = tuple[bool, Any]


def takes_monitor(task: Callable) -> bool:
    """Whether `task`'s signature names a `monitor` parameter (the engine then passes its monitor)."""
    try:
        return "monitor" in inspect.signature(task).parameters
    except (TypeError, ValueError):  # a builtin without a signature
        return False


def run(
    task: Callable, monitor: Monitor, args: tuple, kwargs: dict, budget_mb: float | None = None
) -> Outcome:
    """Call `task(*args, **kwargs)` (with `monitor=monitor` when it takes one); its value, or what
    ended it as a `TaskError`.

    Args:
        budget_mb: the memory budget in force (None: none), named by `OverMemory` when the task
            fails for lack of memory.
    """
    try:
        if takes_monitor(task):
            kwargs = {**kwargs, "monitor": monitor}
        return True, task(*args, **kwargs)
    except Stop:
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
