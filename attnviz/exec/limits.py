"""The bounds every task runs under, and the server's budgets, read from the environment.

Per task (`Limits`; `submit(..., limits=Limits(...))` overrides any of them):
- `ATTNVIZ_RUN_MAX_SECONDS` [600]: wall time once running; then it is stopped, and killed
  `grace_s` later if it has not stopped by itself (`OverTime`).
- `ATTNVIZ_RUN_MB` [512]: memory a task may add to its worker, enforced by the worker itself
  (`OverMemory`). The pages refuse work whose estimate is over the per-run budget (256 MiB)
  before submitting; this is the second guard, for when an estimate is wrong. Loading a
  framework or a checkpoint does not count (the checkpoint cache has its own bound).
- `ATTNVIZ_RUN_MAX_WAIT_S` [120]: time a task may wait for a free worker (`NoWorker`).
- `grace_s` [3]: after `stop()` or the time limit, how long a task has to stop by itself
  before its worker is killed (issue 26: a closed tab's work ends within 3 s).

Per server (`Budget`):
- `ATTNVIZ_MAX_CONCURRENT_RUNS` [2]: worker processes, so tasks running at once.
- `ATTNVIZ_TRAIN_MAX_RUNS` [2]: trainings at once, counted in the same workers, and never all
  of them (at most `MAX_CONCURRENT_RUNS − 1`, at least 1) so a visitor's page still finds one.
- `ATTNVIZ_WORKER_NICE` [10]: the workers' scheduling niceness above the server's, so the
  server's own work (drawing pages) comes first on a busy machine.
- `ATTNVIZ_THREADS` [1]: intra-op threads per task in each framework.
- `ATTNVIZ_WORKER_IDLE_S` [300]: a worker that ran a task and then waited this long for the
  next is ended, with everything it holds (checkpoints, built models, the frameworks' pools);
  a warmed engine starts a fresh one at once (its frameworks imported, nothing loaded).
- `ATTNVIZ_WORKER_KEEP_MB` [6144]: a worker whose resident memory is above this after a task
  is ended and replaced the same way, at once. Ending the process is what gives TensorFlow's
  memory back: dropping the checkpoints and trimming the heap in place left a worker that had
  run SmolLM2 and Gemma 3 in both frameworks at 2.1 GiB against 0.8 GiB fresh (docs/security.md).
The local engine applies both; on a Dask cluster each worker's `--memory-limit` is the bound.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from attnviz.cache import env_number
from attnviz.errors import SpecError


@dataclass(frozen=True)
class Limits:
    """One task's bounds (defaults in brackets above). `memory_mb` None: no budget."""

    seconds: float = 600.0
    memory_mb: float | None = 512.0
    wait_s: float = 120.0
    grace_s: float = 3.0

    def __post_init__(self):
        for name in ("seconds", "wait_s", "grace_s"):
            _check_positive(name, getattr(self, name))
        if self.memory_mb is not None:
            _check_positive("memory_mb", self.memory_mb)

    @classmethod
    def from_env(cls) -> Limits:
        d = cls()
        return cls(
            seconds=env_number("ATTNVIZ_RUN_MAX_SECONDS", d.seconds, minimum=1),
            memory_mb=env_number("ATTNVIZ_RUN_MB", d.memory_mb, minimum=1),
            wait_s=env_number("ATTNVIZ_RUN_MAX_WAIT_S", d.wait_s, minimum=1),
        )

    def replace(self, **changes) -> Limits:
        return dataclasses.replace(self, **changes)


def _check_positive(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < float("inf"):
        raise SpecError(name, value, "a finite number of seconds or MiB above 0")


@dataclass(frozen=True)
class Budget:
    """The server's workers: `workers` processes, at most `trainings` of them training, each at
    niceness `nice` with `threads` intra-op threads; one is ended after `idle_s` seconds without
    a task, or after a task that left it above `keep_mb` MiB resident."""

    workers: int = 2
    trainings: int = 1
    nice: int = 10
    threads: int = 1
    idle_s: float = 300.0
    keep_mb: float = 6144.0

    def __post_init__(self):
        for name in ("idle_s", "keep_mb"):
            _check_positive(name, getattr(self, name))

    @classmethod
    def from_env(cls) -> Budget:
        workers = int(env_number("ATTNVIZ_MAX_CONCURRENT_RUNS", 2, minimum=1))
        trainings = int(env_number("ATTNVIZ_TRAIN_MAX_RUNS", 2, minimum=1))
        return cls(
            workers=workers,
            trainings=min(trainings, max(1, workers - 1)),
            nice=int(env_number("ATTNVIZ_WORKER_NICE", 10, minimum=0)),
            threads=int(env_number("ATTNVIZ_THREADS", 1, minimum=1)),
            idle_s=env_number("ATTNVIZ_WORKER_IDLE_S", cls.idle_s, minimum=1),
            keep_mb=env_number("ATTNVIZ_WORKER_KEEP_MB", cls.keep_mb, minimum=1),
        )
