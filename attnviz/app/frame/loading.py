"""What the server knows about the frameworks without importing one (issue 42: no framework in the
Streamlit process), and shared modules imported once.

The frameworks are imported only in the execution layer's workers (`attnviz.exec`, through
`attnviz.app.frame.door`): which ones are installed is read from their package metadata
(`installed_frameworks`), whether one sees a GPU is asked of a worker once per server and kept
(`gpu_available`, `gpu_known`), and `loaded(framework)` says whether a worker has already answered
for it — until then the explorer draws its NumPy reference's preview while the worker starts.
"""

from __future__ import annotations

import threading

from attnviz import exec as ex
from attnviz.app.frame import door
from attnviz.app.sidebar import tasks
from attnviz.cache import env_number
from attnviz.frameworks import FRAMEWORKS, installed, label

# Intra-op threads per computation (ATTNVIZ_THREADS, default 1; at least 1), the workers' count too
# (`attnviz.exec.limits.Budget.threads`): a classroom server runs many visitors' computations at once,
# and on a busy 2-core machine two PyTorch threads made small runs 10-1000x slower (each parallel region
# waits for a descheduled thread). The Timing page's sweep runs with it.
APP_THREADS = int(env_number("ATTNVIZ_THREADS", 1, minimum=1))

_IMPORTS = threading.Lock()
_READY: set[str] = set()  # frameworks a worker of this server has run a task in
_GPU: dict[str, bool] = {}  # each framework's answer, asked of a worker once per server
_ASKED: dict[str, ex.Handle] = {}  # questions in flight (`gpu_known`)
_LOCK = threading.Lock()


def import_shared_modules() -> None:
    """Import pandas once, under a lock, before any page uses it.

    Several first visitors at once import it from several script threads; one of
    them then saw a partially initialised pandas (AttributeError: 'pandas' has no
    attribute 'Series', in the ten-session load test). Costs 0.3-0.5 s once per server: the sidebar
    calls it after drawing its controls, except where the explorer's preview is drawn first (a
    server's first visitor), which calls it after that chart, while a worker runs the framework.
    """
    with _IMPORTS:
        import pandas  # noqa: F401


def loaded(framework: str) -> bool:
    """Whether a worker of this server has already run `framework` (its import done there)."""
    return framework in _READY


def mark_loaded(*frameworks: str) -> None:
    """A task in `frameworks` came back from a worker (the runs call this)."""
    _READY.update(frameworks)


def gpu_available(framework: str) -> bool:
    """Whether `framework` sees a GPU, asked of a worker once per server (with a progress bar while
    it starts) and kept. A question that fails (no worker) answers False: the run goes to the CPU."""
    known = gpu_known(framework)
    if known is not None:
        return known
    try:
        answer = door.run(
            tasks.gpu_available, framework, spinner=f"Asking a {label(framework)} worker for a GPU"
        )
    except ex.TaskError:
        return False
    return _keep(framework, answer)


def gpu_known(framework: str) -> bool | None:
    """The answer of `gpu_available` if a worker has given it; else None, and the question is sent
    (once, without waiting: the sidebar reads the answer on a later run)."""
    with _LOCK:
        if framework in _GPU:
            return _GPU[framework]
        handle = _ASKED.get(framework)
        if handle is None:
            _ASKED[framework] = ex.submit(tasks.gpu_available, framework)
            return None
        if not handle.done():
            return None
        del _ASKED[framework]  # asked again next time if it failed
    try:
        return _keep(framework, handle.result(timeout=0))
    except ex.TaskError:
        return None


def _keep(framework: str, answer: bool) -> bool:
    with _LOCK:
        _GPU[framework] = bool(answer)
    mark_loaded(framework)
    return bool(answer)


def installed_frameworks() -> list[str]:
    """The frameworks importable here, in `FRAMEWORKS` order (nothing is imported)."""
    return installed()


__all__ = [
    "APP_THREADS",
    "FRAMEWORKS",
    "gpu_available",
    "gpu_known",
    "import_shared_modules",
    "installed_frameworks",
    "loaded",
    "mark_loaded",
]
