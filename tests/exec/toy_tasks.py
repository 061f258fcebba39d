"""Tiny tasks for the execution layer's tests: module-level, so a worker process imports them."""

from __future__ import annotations

import os
import time

import numpy as np

from attnviz.errors import SpecError


def add(a, b):
    return a + b


def counts(n: int, *, monitor):
    """Reports 1 … n with the square of each as a partial; returns the squares' sum."""
    for i in range(1, n + 1):
        monitor.report(i, n, i * i)
    return sum(i * i for i in range(1, n + 1))


def pid():
    return os.getpid()


def warmed(frameworks: tuple[str, ...]):
    """A worker's warm-up (`exec.warm(..., warm_up=warmed)`): what it was given, and where it ran."""
    return {"frameworks": frameworks, "pid": os.getpid()}


def pid_on(source: str):
    """A task on a checkpoint (its first argument is `source`): the worker's process id."""
    return os.getpid()


def held_on(source: str, *, monitor):
    """A task on a checkpoint that runs until asked to stop: the worker's process id."""
    monitor.report(1, 2)
    while not monitor.stopped():
        time.sleep(0.01)
    return os.getpid()


def bad_input(lr):
    raise SpecError("lr", lr, "a number from 1e-05 to 1")


def until_stopped(hold_mb: int = 0, limit_s: float = 60.0, *, monitor):
    """Holds `hold_mb` MiB (touched) and reports until asked to stop; returns the steps done."""
    held = np.ones(hold_mb * 2**18, np.float32) if hold_mb else None
    step, end = 0, time.monotonic() + limit_s
    while not monitor.stopped() and time.monotonic() < end:
        step += 1
        monitor.report(step, None)
        time.sleep(0.01)
    del held
    return step


def slow_to_stop(finish_s: float, *, monitor):
    """Reports until asked to stop, then takes `finish_s` to finish its last step (a generation's
    final pass over the whole text); returns "finished"."""
    monitor.report(1, 2)
    while not monitor.stopped():
        time.sleep(0.01)
    time.sleep(finish_s)
    return "finished"


def ignores_stop(limit_s: float = 60.0, *, monitor):
    """Never looks at the stop flag: only a kill ends it (or `limit_s`)."""
    monitor.report(1, 2)
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        time.sleep(0.01)
    return "ran to the end"


def stepper(n: int, *, monitor):
    """Uses `monitor.step` as a library's progress callback would."""
    for i in range(n):
        time.sleep(0.01)
        monitor.step(i + 1, n)
    return n


def allocate(mb: int):
    """Touches `mb` MiB of numpy memory and returns its sum."""
    return float(np.ones(mb * 2**18, np.float32).sum())


def allocate_loaded(load_mb: int, mb: int, *, monitor):
    """`load_mb` MiB outside the budget (as a checkpoint loads), then `mb` MiB inside it."""
    with monitor.loading():
        kept = np.ones(load_mb * 2**18, np.float32)
    return float(kept.sum() + np.ones(mb * 2**18, np.float32).sum())


_KEPT: list[np.ndarray] = []  # what `keep` leaves in its worker, as a checkpoint cache would


def keep(mb: int):
    """Touches `mb` MiB and keeps it in the worker after the task; the worker's process id."""
    _KEPT.append(np.ones(mb * 2**18, np.float32))
    return os.getpid()


def unpicklable_result():
    return lambda: None


def allocate_framework(framework: str, mb: int, *, monitor):
    """Loads `framework` outside the budget, then asks it for a `mb` MiB tensor."""
    from attnviz.frameworks import prepare

    with monitor.loading():
        prepare(framework)
    if framework == "torch":
        import torch

        return float(torch.ones(mb * 2**18).sum())
    import tensorflow as tf

    return float(tf.reduce_sum(tf.ones((mb * 2**18,))))


def tensorflow_then_numpy(grown_mb: int, tensor_mb: int, numpy_mb: int, *, monitor):
    """TensorFlow's CPU memory grown to `grown_mb` MiB outside the budget and freed (as loading and
    running a model do), then inside it a `tensor_mb` MiB tensor, held while NumPy asks for `numpy_mb`
    MiB: the sums of both."""
    from attnviz.frameworks import prepare

    with monitor.loading():
        prepare("tensorflow")
        import tensorflow as tf

        grown = [tf.fill((64 * 2**18,), 1.0) for _ in range(grown_mb // 64)]  # 64 MiB each
        del grown
    tensor = tf.fill((tensor_mb * 2**18,), 1.0)
    return float(tf.reduce_sum(tensor)) + float(np.ones(numpy_mb * 2**18, np.float32).sum())


def reports_then_waits(path: str, *, monitor):
    """Reports one partial result, then waits (60 s at most) for `path` to exist: True once it does.
    A caller that reads the partials while the task runs creates it (`door.follow`'s `partials`)."""
    monitor.report(1, 2, "first")
    deadline = time.monotonic() + 60
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)
    return os.path.exists(path)


def worker_environment():
    """What NumPy's BLAS and TensorFlow's allocator were told in this process: their variables."""
    import os

    from attnviz.exec.local import BLAS_THREADS, TF_ALLOCATOR

    return {name: os.environ.get(name) for name in (*BLAS_THREADS, *TF_ALLOCATOR)}
