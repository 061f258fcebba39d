"""Training in the background for the app: `TrainingJob` runs one or two frameworks in a thread."""

from __future__ import annotations

import contextlib
import threading

import numpy as np

from attnviz.training.config import TrainConfig, init_params
from attnviz.training.loop import Trainer, trainer_module


class TrainingJob:
    """Trains one or several frameworks from the same start in a background thread.

    The frameworks take turns, `snapshot_every` steps each, so their runs grow
    side by side; `runs` can be read at any time (lists only grow). `stop()`
    ends training and keeps what was done. Holds no Streamlit state.
    """

    def __init__(
        self, config: TrainConfig, frameworks: list[str], params: dict[str, np.ndarray] | None = None
    ):
        start = init_params(config) if params is None else params
        self.config = config
        self.trainers = {fw: Trainer(config, fw, start) for fw in frameworks}
        self.runs = {fw: t.run for fw, t in self.trainers.items()}
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._work, name="attnviz-training", daemon=True)

    def start(self) -> TrainingJob:
        self._thread.start()
        return self

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    @property
    def done(self) -> bool:
        return all(run.finished for run in self.runs.values())

    def stop(self, timeout: float = 60.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _work(self) -> None:
        limits = contextlib.ExitStack()
        try:
            for fw in self.trainers:
                limits.enter_context(trainer_module(fw).thread_limit(1))  # this thread only
            while not self._stop.is_set() and any(
                r.steps_done < self.config.steps for r in self.runs.values()
            ):
                for trainer in self.trainers.values():
                    for _ in range(self.config.snapshot_every):
                        if self._stop.is_set() or trainer.run.steps_done >= self.config.steps:
                            break
                        trainer.step()
        except ValueError as error:  # diverged: keep what was trained, say why
            self.error = str(error)
        except Exception as error:  # the thread's end: say what happened rather than die silently
            self.error = f"training failed: {type(error).__name__}: {error}"
        finally:
            for trainer in self.trainers.values():
                trainer.finish(stopped=self._stop.is_set() or self.error is not None)
            limits.close()
