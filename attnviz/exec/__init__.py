"""The one door for heavy work: `submit(task, *args) → Handle`, run in a worker process — local
processes by default, a Dask cluster when `ATTNVIZ_DASK_SCHEDULER=tcp://host:8786` is set.

The engine knows no domain: it runs any function importable by name, with picklable arguments
and no Streamlit inside, and imports only attnviz's core. A function whose signature names a
`monitor` parameter is given the task's `attnviz.exec.monitor.Monitor` (its reports reach the handle,
its `stopped()` reads the handle's stop, its `loading()` pauses the memory budget). The app's tasks
live with their domains (`attnviz.pretrained.tasks`, `attnviz.training.schedule.train`,
`attnviz.lessons.registry.packed_exercise`, `attnviz.bench.run_sweep`, a screen's own `tasks.py`
such as `attnviz.app.interpret.tasks`). A page submits, draws progress, stops the task when its tab
closes, and reads the value or the error:

    handle = exec.submit(pretrained.tasks.generate, name, text, "torch", 20)
    p = handle.progress()                  # state, done, total, partials, elapsed_s
    handle.wait(1.0)                       # returns on the next report or the end (≤ 1 s)
    handle.stop()                          # the Stop button, a closed tab: ends within grace_s
    value = handle.result(timeout=0)       # or raises a TaskError that names what failed

Every wait is bounded: a task runs at most `Limits.seconds`, waits for a worker at most
`Limits.wait_s`, and a stopped task is killed `Limits.grace_s` after the stop if it has not
ended by itself. docs/deploy.md says what runs where; docs/security.md what it costs.
"""

from __future__ import annotations

import atexit
import importlib.util
import inspect
import os
import pickle
import re
import threading
from typing import Any

from attnviz.errors import SpecError
from attnviz.exec.failures import (
    Busy,
    NoWorker,
    OverMemory,
    OverTime,
    Stopped,
    TaskError,
    TaskFailed,
    WorkerStopped,
)
from attnviz.exec.handle import Handle, Progress
from attnviz.exec.limits import Budget, Limits
from attnviz.exec.local import LocalEngine
from attnviz.exec.monitor import Monitor, Stop
from attnviz.exec.worker import named as _named

ENV_SCHEDULER = "ATTNVIZ_DASK_SCHEDULER"

__all__ = [
    "ENV_SCHEDULER",
    "Budget",
    "Busy",
    "Handle",
    "Limits",
    "LocalEngine",
    "Monitor",
    "NoWorker",
    "OverMemory",
    "OverTime",
    "Progress",
    "Stop",
    "Stopped",
    "TaskError",
    "TaskFailed",
    "WorkerStopped",
    "get_engine",
    "shutdown",
    "submit",
    "warm",
]

_ENGINES: dict[str, Any] = {}
_LOCK = threading.Lock()


def get_engine(which: Any = None):
    """The engine `which` names: an engine object itself; "local"; a Dask scheduler's address
    ("tcp://host:8786"); None: `ATTNVIZ_DASK_SCHEDULER`'s address when set, else "local".
    One engine per name per process, made on first use."""
    if which is not None and not isinstance(which, str):
        return which
    name = which or os.environ.get(ENV_SCHEDULER, "").strip() or "local"
    with _LOCK:
        if name not in _ENGINES:
            _ENGINES[name] = LocalEngine() if name == "local" else _cluster(name)
        return _ENGINES[name]


def _cluster(address: str):
    if "://" not in address:
        raise SpecError(
            ENV_SCHEDULER, address, "a Dask scheduler's address such as 'tcp://host:8786', or 'local'"
        )
    from attnviz.exec.cluster import DaskEngine

    if importlib.util.find_spec("distributed") is None:  # an optional extra
        raise SpecError(
            ENV_SCHEDULER,
            address,
            "a local engine here: install the cluster extra for Dask (pip install 'attnviz[cluster]')",
        )
    return DaskEngine(address)


def submit(
    task,
    *args,
    engine: Any = None,
    limits: Limits | None = None,
    training: bool = False,
    quick: bool = False,
    **kwargs,
):
    """Run `task(*args, **kwargs)` in a worker; its `Handle` at once.

    Args:
        task: a module-level function (workers import it by name); given the task's monitor as
            `monitor=` when its signature names one.
        engine: see `get_engine`; default the environment's.
        limits: its bounds (default `Limits.from_env()`).
        training: it counts against the server's trainings (`Budget.trainings`).
        quick: a task of well under a second (a page's first view waits for it: the explorer's run):
            the next free worker takes it before any task queued earlier that is not quick, so it does
            not wait behind a queue of model screens (issue 42's ten visitors: seven explorers waited
            past the 120-s queue limit behind the other visitors' model tasks).

    Raises:
        SpecError: `task` is not a module-level function, or an argument cannot be pickled.
        Busy: a training while the server runs as many as it allows.
    """
    payload = _payload(task, args, kwargs)
    handle = Handle(
        task.__qualname__, limits or Limits.from_env(), training, _affinity(task, args, kwargs), quick=quick
    )
    return get_engine(engine).submit(handle, payload)


def _affinity(task, args: tuple, kwargs: dict) -> str | None:
    """The checkpoint a task loads — its argument named `source`, by the tasks' convention — or None. The local engine gives such a task to a free worker that has
    already run one with that source (its model loaded: ≈ 1.2 s saved on SmolLM2) before another."""
    try:
        params = list(inspect.signature(task).parameters)
    except (TypeError, ValueError):
        return None
    if "source" not in params:
        return None
    at = params.index("source")
    source = args[at] if at < len(args) else kwargs.get("source")
    return source if isinstance(source, str) else None


def warm(frameworks: tuple[str, ...] = ("torch",), engine: Any = None, *, warm_up=None) -> None:
    """Start the workers now, each importing `frameworks` (a server calls this at start, so the
    first visitor does not wait for a worker and its framework); returns at once.

    Args:
        warm_up: a module-level function, passed by reference as a task is (the engine imports no
            domain), or its dotted path (`"attnviz.training.schedule.warm_up"`: imported in the
            worker only, so the caller need not import its module — the server's first page does
            not pay it), that every worker then calls as `warm_up(frameworks)` before its first task,
            at its low priority: a domain's first step in each framework, so that the first
            visitor's task does not pay it (`attnviz.training.schedule.warm_up`: one tiny training).
            What it did is the worker's `attnviz.exec.worker.state()`.

    Raises:
        SpecError: `warm_up` is not a module-level function.
    """
    frameworks = tuple(frameworks)
    if isinstance(warm_up, str):
        if not re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)+", warm_up):
            raise SpecError("warm_up", warm_up, "a module-level function or its dotted path, module.function")
        payload = _payload(_named, (warm_up, frameworks), {}, "warm_up")
    else:
        payload = None if warm_up is None else _payload(warm_up, (frameworks,), {}, "warm_up")
    get_engine(engine).warm(frameworks, payload)


@atexit.register
def shutdown() -> None:
    """End every engine this process made: queued tasks stop, workers end."""
    with _LOCK:
        engines = list(_ENGINES.values())
        _ENGINES.clear()
    for each in engines:
        each.close()


def _payload(task, args: tuple, kwargs: dict, field: str = "task") -> bytes:
    """`(task, args, kwargs)` pickled, or a `SpecError` saying which part cannot travel (`field`:
    what the caller calls the function)."""
    qualname = getattr(task, "__qualname__", None)
    module = getattr(task, "__module__", None)
    if not callable(task) or not qualname or "<" in qualname or module in (None, "__main__"):
        raise SpecError(
            field, task, "a function defined at the top level of an importable module (workers import it)"
        )
    try:
        return pickle.dumps((task, args, kwargs), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as error:
        raise SpecError(
            "arguments",
            f"{qualname}(…)",
            "values that can be pickled (numbers, text, arrays, dataclasses)",
            value_text=f"an argument that cannot ({type(error).__name__}: {error})",
        ) from None
