"""The app's side of the execution layer: a page runs heavy work through `run`, which submits it
to `attnviz.exec` for this visitor, draws its progress and returns its value.

    value = door.run(tasks.logit_lens, name, text, "torch", spinner="Reading every layer…", cache="lens")

- The task runs in a worker process (`attnviz.exec.submit`); the script thread only waits on its
  handle (`Handle.wait`, woken by each report) and redraws one progress bar: the spinner text and
  done / total.
- It is stopped when its visitor leaves (`Handle.stop_when_gone` with the session's liveness,
  `attnviz.app.frame.session`) and when this script run is interrupted: a widget change makes
  Streamlit raise its rerun / stop exception inside the wait, and the `finally` stops the handle.
- `cache="name"` keeps the value in the server's byte-bounded result cache
  (`attnviz.app.frame.results.CACHE`) under `(name, args, kwargs)`: a repeated call returns a copy
  without submitting anything (with `shared=True`, the kept value itself, its arrays read-only).
- What ended it without a value is raised as an `attnviz.exec.TaskError` (or the `SpecError` of
  a refused submit); `show_failure(error)` shows it as the page's message.

`start` submits without waiting (a training that outlives the script run: the page draws its
progress in a fragment from `handle.progress()`), with the same stop on a closed tab.

Nothing computes with a framework in the server (issue 42): the explorer's, the steps' and the
comparison's runs and their timings go through `run` as well (`attnviz.app.sidebar.runs`), their
small NumPy results kept in the result cache, so a rerun of the same configuration costs a lookup
(no copy: they are shared read-only), not a worker's round trip (≈ 10-20 ms, docs/benchmarks.md). The server keeps what is
light: a configuration checked, the NumPy reference's preview, figures built from a result.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import os
import threading
import warnings
from collections.abc import Callable
from typing import Any

import streamlit as st

from attnviz import exec as ex
from attnviz.app.frame import results
from attnviz.app.frame.literal import escape_markdown
from attnviz.app.frame.session import button, session_alive, session_id
from attnviz.errors import SpecError
from attnviz.frameworks import FRAMEWORKS

# The frameworks each worker imports when the server starts them, at its first script run ("torch",
# "torch,tensorflow"); "0" or "none": start workers only when a task needs one.
WARM_ENV = "ATTNVIZ_WARM_WORKERS"
# What every worker runs once it has imported them, named (imported in the worker, not here: the
# lab's package pulls in the analyses and the pretrained families, 0.2 s on the first page's path).
WARM_UP = "attnviz.training.schedule.warm_up"
WAIT_S = 1.0  # the progress bar is redrawn on every report, and at least this often (elapsed time)
# A tab away this long has closed (a reconnect within it keeps its task). Then the task has
# `STOP_GRACE_S` to stop by itself before its worker is killed: a closed tab's task has ended within
# about 3.5 s of the close (issue 28: 5 s) even inside a step it cannot leave (a model's forward
# pass, one Timing measurement), and sooner when it checks between steps (live: 1.1-2.8 s).
GONE_AFTER_S = 1.0
STOP_GRACE_S = 2.0
QUEUED_TEXT = "waiting for a free worker"

__all__ = ["WAIT_S", "cached", "keep", "run", "show_failure", "start", "warm"]


def run(
    task,
    *args,
    spinner: str,
    cache: str | None = None,
    ttl: float = 600,
    limits: ex.Limits | None = None,
    shared: bool = False,
    quick: bool = False,
    **kwargs,
) -> Any:
    """`task(*args, **kwargs)` (a task of a domain or a screen: `attnviz.pretrained.tasks`, a screen's `tasks.py`, …) run in a worker for this
    visitor; its value.

    Args:
        spinner: what the progress bar says while it runs.
        cache: a name: keep the value in the server's result cache under `(cache, args, kwargs)`
            for `ttl` seconds without use; a repeated call returns a copy at once. None: no cache.
        limits: the task's bounds (default: the server's, `Limits.from_env()`).
        shared: with `cache`, hand out the cached value itself, its arrays read-only
            (`results.read_only`), instead of a deep copy per call: for a caller that never changes
            it (the explorer's runs; a change raises instead of reaching another session).
        quick: a task of well under a second, taken before the queued others (`attnviz.exec.submit`).

    Raises:
        TaskError: what ended it (`TaskFailed` with the library's field and allowed values,
            `WorkerStopped`, `OverTime`, `OverMemory`, `Stopped`, `NoWorker`).
        SpecError: the submit was refused (an argument that cannot travel).
    """
    if cache:
        hit, value = cached(cache, *args, shared=shared, **kwargs)
        if hit:
            # The progress bar's slot, as a run that submits draws it (`follow`): the elements after it
            # keep their places from run to run, or the browser draws every chart below anew.
            st.empty()
            return value
    handle = start(task, *args, limits=limits, quick=quick, **kwargs)
    value = follow(handle, spinner)
    if cache:
        return keep(cache, args, kwargs, value, ttl=ttl, shared=shared)
    return value


def keep(cache: str, args: tuple, kwargs: dict, value: Any, *, ttl: float = 600, shared: bool = False) -> Any:
    """Put `value` in the result cache as `run(task, *args, cache=cache, **kwargs)` would (a task that
    answers for two caches at once: `attnviz.app.sidebar.runs.run_and_timing`); what `run` returns.

    The cache keeps its own copy, never handed out unless `shared` (then read-only), with arrays that
    own their memory: an unpickled array is a view of the message's buffer, which the cache's measure
    (`attnviz.cache.nbytes`) would count twice — half the results kept."""
    kept = results.read_only(value) if shared else copy.deepcopy(value)
    results.CACHE.put(_cache_key(cache, args, kwargs), kept, ttl)
    return kept if shared else value


def _cache_key(cache: str, args: tuple, kwargs: dict) -> tuple:
    """The result cache's key of a call: lists (a prompt's token ids) as tuples, so the key hashes."""

    def frozen(value):
        if isinstance(value, list | tuple):
            return tuple(frozen(v) for v in value)
        if isinstance(value, dict):
            return tuple(sorted((k, frozen(v)) for k, v in value.items()))
        return value

    return (cache, frozen(args), frozen(kwargs))


def cached(cache: str, *args, shared: bool = False, **kwargs) -> tuple[bool, Any]:
    """`(True, the value)` when `run(task, *args, cache=cache, **kwargs)` would not submit (a page that
    shows a Run button only when the result is not there yet); else `(False, None)`. The value is a
    copy, or with `shared` the cached value itself (read-only: `run`'s `shared`)."""
    hit, value = results.CACHE.get(_cache_key(cache, args, kwargs))
    if not hit:
        return False, None
    return True, value if shared else copy.deepcopy(value)


def start(
    task, *args, limits: ex.Limits | None = None, training: bool = False, quick: bool = False, **kwargs
) -> ex.Handle:
    """Submit `task(*args, **kwargs)` for this visitor without waiting: its handle, stopped when the
    visitor's tab closes or session expires.

    Raises:
        Busy: a training while the server runs as many as it allows.
        SpecError: an argument that cannot travel to a worker.
    """
    limits = limits or ex.Limits.from_env()
    limits = limits.replace(grace_s=min(limits.grace_s, STOP_GRACE_S))
    handle = ex.submit(task, *args, limits=limits, training=training, quick=quick, **kwargs)
    return handle.stop_when_gone(functools.partial(session_alive, session_id()), after_s=GONE_AFTER_S)


def follow(handle: ex.Handle, spinner: str, *, partials: Callable[[tuple], None] | None = None) -> Any:
    """Draw `handle`'s progress until it ends; its value (or its `TaskError`, raised). Stops the task
    if this script run ends first (a rerun, a stop, a closed tab). `partials`: called with every
    partial result so far each time new ones arrived while it runs (a page draws them as they come)."""
    bar, seen = st.empty(), 0
    try:
        while not handle.done():
            progress = handle.progress()
            bar.progress(*_bar(spinner, progress))
            if partials is not None and len(progress.partials) > seen:
                seen = len(progress.partials)
                partials(progress.partials)
            handle.wait(WAIT_S)
        return handle.result(timeout=0)
    finally:
        handle.stop()  # nothing once it ended; otherwise the run was interrupted: stop its task
        bar.empty()


def _bar(spinner: str, p: ex.Progress) -> tuple[float, str]:
    """The progress bar's fraction and text, each number with its unit: "spinner · 1 of 2 parts done ·
    1 min 32 s so far" (issue 46, point 17: "0 / 1 · 92 s" said neither what was counted nor what the
    seconds were)."""
    if p.state == "queued":
        return 0.0, f"{spinner} — {QUEUED_TEXT}…"
    counted = f" · {p.done:,} of {p.total:,} part{'s' * (p.total != 1)} done" if p.total else ""
    minutes, seconds = divmod(round(p.elapsed_s), 60)
    took = f"{minutes} min {seconds} s" if minutes else f"{seconds} s"
    return p.fraction, f"{spinner}{counted} · {took} so far"


def show_failure(error: BaseException, *, key: str | None = None, on_again=None) -> bool:
    """Show what ended a task as the page's message; True on the run in which the visitor pressed
    its "Run again" button (shown for a worker that stopped or was not free: the same request
    may well succeed now). A page whose run follows from its widgets reruns anyway; a page whose
    run follows a button passes `on_again` (the button's callback: set what starts the run).

    - a bad input (`TaskFailed` from a `SpecError`, or a `SpecError`): the field, what was
      received and what is allowed;
    - `WorkerStopped`: "the worker stopped (…)", and the button;
    - `OverTime` / `OverMemory`: the time or memory budget, and the setting that sets it;
    - `Stopped`: that it was stopped; `NoWorker`: the server is busy, and the button.
    """
    again = False
    text = escape_markdown(str(error))
    if (isinstance(error, ex.TaskFailed) and error.field is not None) or isinstance(error, SpecError):
        st.error(text, icon=":material/block:")
    elif isinstance(error, ex.WorkerStopped | ex.NoWorker):
        st.error(f"The run did not finish: {text}.", icon=":material/restart_alt:")
        again = button("Run again", key=key or _key(error), icon=":material/replay:", on_click=on_again)
    elif isinstance(error, ex.OverTime):
        st.error(
            f"The run was ended: {text} (ATTNVIZ_RUN_MAX_SECONDS on this server). Try a shorter input "
            "or a smaller model.",
            icon=":material/timer_off:",
        )
    elif isinstance(error, ex.OverMemory):  # the allocator's own words are for the server's log
        st.error(
            f"The run was ended: it needed more than the memory budget of {error.budget_mb:g} MiB per run "
            "(ATTNVIZ_RUN_MB on this server). Try a shorter input or a smaller model.",
            icon=":material/memory:",
        )
    elif isinstance(error, ex.Stopped):
        st.info(f"The run was {text}.", icon=":material/stop_circle:")
    else:
        st.error(f"The run failed: {text}", icon=":material/error:")
    return again


_WARMED = threading.Event()


def warm() -> None:
    """Once per server process, start the workers, each importing the frameworks `ATTNVIZ_WARM_WORKERS`
    names (default PyTorch; `attnviz.exec.warm`) and then training a tiny model in each
    (`attnviz.training.schedule.warm_up`: a framework's first training pays its first trace), so the
    first visitor's heavy task does not wait for a worker, its framework or that; returns at once. Only under a running Streamlit server (not AppTest or
    bare mode: a test starts workers when a task needs them). The shell calls it at the start of the
    server's first script run, before the page: the workers start at a lower priority
    (`ATTNVIZ_WORKER_NICE`), so the first page is drawn first while they import their framework, and
    its first run finds one (docs/performance.md measures the first chart)."""
    if _WARMED.is_set() or not serving():
        return
    _WARMED.set()
    frameworks = warm_frameworks(os.environ.get(WARM_ENV))
    if frameworks is not None:
        ex.warm(frameworks, warm_up=WARM_UP)


def warm_frameworks(setting: str | None) -> tuple[str, ...] | None:
    """`ATTNVIZ_WARM_WORKERS` read: the frameworks to import (None: do not start workers early).
    Unset: PyTorch. A name that is no framework warns and is left out."""
    if setting is None:
        return ("torch",)
    names = [n.strip().lower() for n in setting.split(",") if n.strip()]
    if not names or names in (["0"], ["none"]):
        return None
    known = [n for n in names if n in FRAMEWORKS]
    if len(known) < len(names):
        warnings.warn(
            f"{WARM_ENV}={setting!r}: allowed framework names {', '.join(FRAMEWORKS)}, or 0 / none",
            RuntimeWarning,
            stacklevel=2,
        )
    return tuple(known)


def serving() -> bool:
    """Whether a running Streamlit server runs this script: not bare mode, and not AppTest, which
    installs a stand-in runtime (a `MagicMock(spec=Runtime)`: `runtime.exists()` is True there, and
    `isinstance` too, so the type itself is compared)."""
    try:
        from streamlit import runtime

        return runtime.exists() and type(runtime.get_instance()) is runtime.Runtime
    except Exception:  # a Streamlit release without this API: do not start workers early
        return False


def _key(error: BaseException) -> str:
    return "door.again." + hashlib.sha1(f"{type(error).__name__}:{error}".encode()).hexdigest()[:12]
