"""The Training lab's schedule: two frameworks trained side by side from the same start, reported
as they go — what the lab's page runs in a worker (`attnviz.exec.submit(schedule.train, …)`), and
what a notebook can call directly with its own `attnviz.exec.monitor.Monitor`.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field

from attnviz.exec.monitor import Monitor, watch
from attnviz.frameworks import prepare
from attnviz.pretrained.families.lab import TrainConfig, init_params
from attnviz.training.history import TrainingRun
from attnviz.training.loop import Trainer, trainer_module


@dataclass
class Trained:
    """A training task's value.

    Attributes:
        runs: framework → its finished (or stopped) `TrainingRun`, with the final weights.
        ended: why it ended before its last step ("stopped", "time limit (…)"), else None.
        error: the run's own error (a diverged loss), what was trained being kept; else None.
    """

    runs: dict[str, TrainingRun] = field(default_factory=dict)
    ended: str | None = None
    error: str | None = None


def train(
    config: TrainConfig | dict,
    frameworks: list[str],
    max_seconds: float | None = None,
    *,
    monitor: Monitor | None = None,
) -> Trained:
    """Train `config` in each of `frameworks` from the same start, the frameworks taking turns
    `snapshot_every` steps each (their runs grow side by side), one thread each.

    After each turn it reports `(steps done, steps in all)` and a partial `{framework: TrainingRun}`
    holding what is new since the last report (history rows, snapshots, scores) to `monitor`:
    `training_runs` joins a handle's partials into the runs so far, for a page to draw live.

    Args:
        max_seconds: wall time after which it ends, keeping what it learned (the server's
            `ATTNVIZ_TRAIN_MAX_SECONDS`); a stop ends it the same way.
    """
    monitor = watch(monitor)
    config = config if isinstance(config, TrainConfig) else TrainConfig.from_dict(config)
    with monitor.loading():
        for framework in frameworks:
            prepare(framework)
    start = init_params(config)
    trainers = {fw: Trainer(config, fw, start) for fw in frameworks}
    sent = {fw: (0, 0, 0) for fw in frameworks}
    _report(monitor, trainers, sent)
    ended, error, began = None, None, time.monotonic()
    with contextlib.ExitStack() as threads:
        for fw in frameworks:
            threads.enter_context(trainer_module(fw).thread_limit(1))  # tiny models are fastest on one
        try:
            while ended is None and any(t.run.steps_done < config.steps for t in trainers.values()):
                for trainer in trainers.values():
                    ended = ended or _turn(monitor, trainer, began, max_seconds)
                _report(monitor, trainers, sent)
        except ValueError as diverged:  # keep what was trained, say why it ended
            error = str(diverged)
        stopped = ended is not None or error is not None
        runs = {fw: trainer.finish(stopped=stopped) for fw, trainer in trainers.items()}
    _report(monitor, trainers, sent)  # the last snapshot, which `finish` takes
    return Trained(runs, ended, error)


# A worker's warm-up (`warm_up`): two steps of a model with every kind of layer the presets use.
WARM_UP = TrainConfig(d_model=16, mlp=True, steps=2, batch=8, snapshot_every=1)


def warm_up(frameworks: tuple[str, ...]) -> dict[str, int]:
    """A tiny training in each of `frameworks`, the lab's task itself (`train`), run by a server's
    workers before any visitor (`attnviz.exec.warm(..., warm_up=warm_up)`): a framework's first
    training in a process pays its first trace and its kernels' first use (TensorFlow: `tf.function`
    tracing, Keras; 5 s of a reverse run at load 13, docs/training.md), which the first visitor's
    run would pay otherwise. Returns the steps trained per framework."""
    runs = {fw: train(WARM_UP, [fw]).runs[fw] for fw in frameworks}
    return {fw: run.steps_done for fw, run in runs.items()}


def _turn(monitor: Monitor, trainer: Trainer, began: float, max_seconds: float | None) -> str | None:
    """Up to `snapshot_every` steps; why the run must end, if it must."""
    for _ in range(trainer.config.snapshot_every):
        if monitor.stopped():
            return "stopped"
        if max_seconds is not None and time.monotonic() - began > max_seconds:
            return f"time limit ({max_seconds:g} s per run on this server)"
        if trainer.run.steps_done >= trainer.config.steps:
            return None
        trainer.step()
    return None


def _report(monitor: Monitor, trainers: dict[str, Trainer], sent: dict) -> None:
    """Report the steps done and, per framework, what is new since the last report."""
    news = {}
    for fw, trainer in trainers.items():
        run, (h, s, c) = trainer.run, sent[fw]
        news[fw] = TrainingRun(
            run.config, fw, run.probe, run.history[h:], run.snapshots[s:], run.scores[c:],
            elapsed_s=run.elapsed_s,
        )  # fmt: skip
        sent[fw] = (len(run.history), len(run.snapshots), len(run.scores))
    done = sum(t.run.steps_done for t in trainers.values())
    monitor.report(done, sum(t.config.steps for t in trainers.values()), news)


def training_runs(partials) -> dict[str, TrainingRun]:
    """The runs so far from a training handle's partials (`train`'s reports), joined in order."""
    runs: dict[str, TrainingRun] = {}
    for news in partials:
        for fw, new in news.items():
            run = runs.setdefault(fw, TrainingRun(new.config, fw, new.probe))
            run.history += new.history
            run.snapshots += new.snapshots
            run.scores += new.scores
            run.elapsed_s = new.elapsed_s
    return runs
