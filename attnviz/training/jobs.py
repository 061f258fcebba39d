"""Training in the background for the app: `TrainingJob` runs one or two frameworks in a thread.

`start_job` is the app's door: it checks the run's size against the server's
budgets before anything is allocated, takes one of the server's training slots
(refusing with `BusyError` when all are taken), and starts a job that ends by
itself when it finishes, is stopped, reaches the server's time limit, or when
`alive()` says its visitor has gone (a closed tab, an expired session, a server
that shuts down). A job that ends drops its models and hands the memory back.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import threading
import time
from collections.abc import Callable

import numpy as np

from attnviz.cache import release_memory
from attnviz.pretrained.families.lab import TrainConfig, init_params
from attnviz.training.limits import BusyError, TrainLimits, check_size
from attnviz.training.loop import Trainer, trainer_module

_LOG = logging.getLogger(__name__)
ALIVE_EVERY_S = 0.25  # how often a job asks whether its visitor is still there
# How long `alive()` must say False before the job ends: a tab that reconnects within it keeps its run,
# and a closed tab's run ends within about this plus one step (the issue 26 target: 3 s).
GONE_AFTER_S = 1.5


class TrainingJob:
    """Trains one or several frameworks from the same start in a background thread.

    The frameworks take turns, `snapshot_every` steps each, so their runs grow
    side by side; `runs` can be read at any time (lists only grow). `stop()`
    ends training and keeps what was done. Holds no Streamlit state.

    Args:
        alive: polled every `ALIVE_EVERY_S`; False for `GONE_AFTER_S` in a row ends the run.
        max_seconds: wall time after which the run ends (None: no limit).
    """

    def __init__(
        self,
        config: TrainConfig,
        frameworks: list[str],
        params: dict[str, np.ndarray] | None = None,
        *,
        alive: Callable[[], bool] | None = None,
        max_seconds: float | None = None,
    ):
        start = init_params(config) if params is None else params
        self.config, self.frameworks = config, list(frameworks)
        self.trainers = {fw: Trainer(config, fw, start) for fw in frameworks}
        self.runs = {fw: t.run for fw, t in self.trainers.items()}
        self.error: str | None = None
        self.ended: str | None = None  # why it ended early: "stopped", "time limit", "session ended"
        self.started_at: float | None = None
        self._alive, self._max_seconds = alive, max_seconds
        self._stop = threading.Event()
        self._on_end: list[Callable[[], None]] = []
        self._thread = threading.Thread(target=self._work, name="attnviz-training", daemon=True)

    def start(self) -> TrainingJob:
        self.started_at = time.monotonic()
        self._thread.start()
        return self

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    @property
    def done(self) -> bool:
        return all(run.finished for run in self.runs.values())

    def join(self, timeout: float | None = None) -> bool:
        """Wait up to `timeout` seconds for the end; True when it has ended."""
        if self._thread.ident is not None:
            self._thread.join(timeout)
        return not self._thread.is_alive()

    def stop(self, timeout: float = 60.0, reason: str = "stopped") -> None:
        if not self._stop.is_set():
            self.ended = self.ended or reason
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _should_end(self, watch: dict) -> bool:
        """True when the run must end now (sets `ended`): stopped, over time, or its visitor gone."""
        if self._stop.is_set():
            return True
        now = time.monotonic()
        if self._max_seconds is not None and now - self.started_at > self._max_seconds:
            self.ended = f"time limit ({self._max_seconds:g} s per run on this server)"
        elif self._alive is not None and now >= watch["next"]:
            watch["next"] = now + ALIVE_EVERY_S
            if self._alive():
                watch["gone_since"] = None
            elif watch["gone_since"] is None:
                watch["gone_since"] = now
            elif now - watch["gone_since"] >= GONE_AFTER_S:
                self.ended = "session ended"
        if self.ended:
            self._stop.set()
        return self._stop.is_set()

    def _work(self) -> None:
        limits = contextlib.ExitStack()
        watch = {"next": 0.0, "gone_since": None}
        try:
            for fw in self.trainers:
                limits.enter_context(trainer_module(fw).thread_limit(1))  # this thread only
            while not self._should_end(watch) and any(
                r.steps_done < self.config.steps for r in self.runs.values()
            ):
                for trainer in self.trainers.values():
                    for _ in range(self.config.snapshot_every):
                        if self._should_end(watch) or trainer.run.steps_done >= self.config.steps:
                            break
                        trainer.step()
        except ValueError as error:  # diverged: keep what was trained, say why
            self.error = str(error)
        except Exception as error:  # the thread's end: say what happened rather than die silently
            self.error = f"training failed: {type(error).__name__}: {error}"
        finally:
            try:
                for trainer in self.trainers.values():
                    trainer.finish(stopped=self._stop.is_set() or self.error is not None)
            finally:
                limits.close()
                self.trainers = {}  # the models (the runs keep the weights as numpy)
                for end in self._on_end:
                    end()
                release_memory()
                if self.ended and self.ended != "stopped":  # the operator's log says why a run ended early
                    steps = max((r.steps_done for r in self.runs.values()), default=0)
                    _LOG.warning("attnviz training: a run ended early (%s) after %d steps", self.ended, steps)


# -- the server's training slots --------------------------------------------------------------

_LOCK = threading.Lock()
_RUNNING: set[TrainingJob] = set()


def running_jobs() -> int:
    """Trainings running on this server now (started through `start_job`)."""
    with _LOCK:
        return len(_RUNNING)


def start_job(
    config: TrainConfig,
    frameworks: list[str],
    *,
    alive: Callable[[], bool] | None = None,
    limits: TrainLimits | None = None,
    on_end: Callable[[], None] | None = None,
) -> TrainingJob:
    """Start a background training under the server's limits.

    Checks the size first (`check_size`: nothing is allocated for a run over budget),
    then takes a slot, then builds the models.

    Raises:
        BudgetError: the run is over a budget (the message says what fits).
        BusyError: `limits.runs` trainings are running on the server.
    """
    limits = limits or TrainLimits.from_env()
    check_size(config, len(frameworks), limits)
    with _LOCK:
        if len(_RUNNING) >= limits.runs:
            raise BusyError(len(_RUNNING), limits.runs)
        placeholder = object()
        _RUNNING.add(placeholder)  # the slot is held while the models are built
    try:
        job = TrainingJob(config, frameworks, alive=alive, max_seconds=limits.seconds)
    except BaseException:
        with _LOCK:
            _RUNNING.discard(placeholder)
        raise

    def release() -> None:
        with _LOCK:
            _RUNNING.discard(job)

    job._on_end.append(release)
    if on_end is not None:  # e.g. give back the app's run slot the training held
        job._on_end.append(on_end)
    with _LOCK:
        _RUNNING.discard(placeholder)
        _RUNNING.add(job)
    return job.start()


@atexit.register
def stop_all(timeout: float = 10.0) -> None:
    """Stop every running job (the server is shutting down), waiting up to `timeout` seconds in all."""
    with _LOCK:
        jobs = [j for j in _RUNNING if isinstance(j, TrainingJob)]
    deadline = time.monotonic() + timeout
    for job in jobs:
        job.stop(timeout=max(0.0, deadline - time.monotonic()), reason="server shut down")
