"""A local worker process: runs one task at a time for the server, at a lower priority, keeping
its imported frameworks and loaded checkpoints from task to task.

The server (`attnviz.exec.local`) starts it with the `spawn` method and talks to it over one pipe:
it sends `("run", number, payload, budget_mb)`; the worker answers `("start", number)`, any
number of `("progress", number, done, total, partial)` and `("done", number, outcome)`. To stop
a task the server writes its number into the shared `stop_flag`; the task sees it through
the monitor's `stopped()`. A task that does not stop is killed with its process.

Memory budget: `RLIMIT_DATA` is set to the worker's data segment when the task starts plus its
budget, and lifted when it ends. Measured on this project's machine (Linux, torch 2.13,
TensorFlow 2.21): over `RLIMIT_DATA` each framework's allocation fails with an exception the task
sees (numpy `MemoryError`, torch `RuntimeError: … can't allocate memory`, TensorFlow
`ResourceExhaustedError`) and the worker lives on, its memory given back. `RLIMIT_AS` counts
address space that TensorFlow reserves without using (1.6-2.0 GiB virtual against 0.7 GiB
resident after its first op), and under it the worker could no longer start a thread; an RSS
watchdog thread would notice only after the memory is taken, and could only kill the worker.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import pickle
import resource
import signal
import time
from collections.abc import Iterator
from typing import Any

from attnviz.cache import MIB, release_memory
from attnviz.exec.monitor import Monitor
from attnviz.exec.outcome import failure, pack, run
from attnviz.frameworks import prepare

# What this process did before its first task (`ready`); a task reads it with `state`.
_READY: dict = {
    "frameworks": (),
    "warm_up": None,
    "warm_up_value": None,
    "warm_up_s": None,
    "warm_up_error": None,
}


def data_bytes() -> int | None:
    """This process's data segment (`VmData`: what `RLIMIT_DATA` counts), None where /proc has none."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


class MemoryBudget:
    """`RLIMIT_DATA` at the current data segment + `mb` MiB while entered (nothing where the
    platform cannot say its data segment)."""

    def __init__(self, mb: float | None):
        self.mb = mb

    def __enter__(self) -> MemoryBudget:
        self._set()
        return self

    def __exit__(self, *exc) -> None:
        self._lift()

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """No limit inside; the budget starts again afterwards from what the process then holds."""
        self._lift()
        try:
            yield
        finally:
            self._set()

    def _set(self) -> None:
        used = data_bytes()
        if self.mb is None or used is None:
            return
        _, hard = resource.getrlimit(resource.RLIMIT_DATA)
        soft = used + int(self.mb * MIB)
        if hard != resource.RLIM_INFINITY:
            soft = min(soft, hard)
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))

    def _lift(self) -> None:
        if self.mb is None:
            return
        _, hard = resource.getrlimit(resource.RLIMIT_DATA)
        resource.setrlimit(resource.RLIMIT_DATA, (hard, hard))


class LocalMonitor(Monitor):
    """A task's monitor in a local worker: reports go down the pipe, stop is the shared flag."""

    def __init__(self, conn, stop_flag, number: int, budget: MemoryBudget):
        super().__init__()
        self._conn, self._flag, self._number, self._budget = conn, stop_flag, number, budget

    def _send(self, done: int, total: int | None, partial: Any) -> None:
        self._conn.send(("progress", self._number, done, total, partial))

    def _stop_flag(self) -> bool:
        return self._flag.value == self._number

    @contextlib.contextmanager
    def loading(self) -> Iterator[None]:
        with self._budget.paused():
            yield


def ready(frameworks: tuple[str, ...], warm_up: bytes | None = None) -> None:
    """Before any task: import each of `frameworks` (`prepare`), then call the warm-up, if given —
    `(function, args, kwargs)` pickled by `attnviz.exec.warm`, a domain's function by reference
    (the engine imports none), e.g. a tiny training so that the first visitor's does not pay the
    framework's first step. A warm-up that fails is recorded (`state`), and the worker serves on."""
    for framework in frameworks:
        prepare(framework)
    _READY["frameworks"] = tuple(frameworks)
    if warm_up is None:
        return
    began = time.perf_counter()
    try:
        function, args, kwargs = pickle.loads(warm_up)
        _READY["warm_up"] = args[0] if function is named else f"{function.__module__}.{function.__qualname__}"
        _READY["warm_up_value"] = function(*args, **kwargs)
    except Exception as error:  # a warm-up is an optimisation: the tasks still run without it
        _READY["warm_up_error"] = f"{type(error).__name__}: {error}"
    _READY["warm_up_s"] = time.perf_counter() - began


def named(path: str, *args):
    """Call the module-level function at the dotted `path` ("package.module.function") with `args`:
    a warm-up given by name (`attnviz.exec.warm`), its module imported here, in the worker."""
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)(*args)


def state() -> dict:
    """What this worker process did before its first task (a task: `submit(worker.state)`):
    `frameworks` imported, `warm_up` (the function's name) run in `warm_up_s` seconds, what it
    returned (`warm_up_value`) or the `warm_up_error` that ended it."""
    return dict(_READY)


def main(conn, stop_flag, nice: int, preload: tuple[str, ...], warm_up: bytes | None = None) -> None:
    """The worker's loop: get ready (`ready`), then run each task the server sends until the pipe
    closes."""
    # Ctrl-C in the server's terminal reaches its whole process group: the server ends its workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(OSError):
        os.nice(nice)  # the server's own work (drawing pages) comes first, the warm-up included
    ready(preload, warm_up)
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):  # the server is gone
            return
        _, number, payload, budget_mb = message
        conn.send(("start", number))
        conn.send(("done", number, pack(_outcome(conn, stop_flag, number, payload, budget_mb))))
        release_memory()  # hand back what the task freed before waiting for the next


def _outcome(conn, stop_flag, number: int, payload: bytes, budget_mb: float | None):
    budget = MemoryBudget(budget_mb)
    try:
        task, args, kwargs = pickle.loads(payload)
    except Exception as error:  # the task's module cannot be imported here
        return False, failure(error)
    with budget:
        return run(task, LocalMonitor(conn, stop_flag, number, budget), args, kwargs, budget_mb)
