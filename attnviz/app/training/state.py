"""The Training lab's state, link and callbacks (pages/training.py draws; this module decides).

Keys: every widget is `training.<field>` and bound to the same URL parameter;
links written before this prefix (`lab_<field>`) are rewritten once, on the first
visit. A run is checked against the server's training budgets (`training.check_size`,
before anything is allocated), then trains in a worker process as the task
`attnviz.training.schedule.train` (`door.start`: counted against the server's trainings, stopped
when its tab closes); the page draws its partial results (`LabJob`). A finished run is
saved for the Pretrained page once, visible to this session only (`training.share`).
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import streamlit as st

from attnviz import exec as ex
from attnviz import training
from attnviz.app import controls
from attnviz.app.frame import door, links
from attnviz.app.frame.session import session_id
from attnviz.errors import SpecError
from attnviz.frameworks import label
from attnviz.training import schedule

PREFIX, OLD_PREFIX = "training.", "lab_"
JOB, SAVED, MESSAGE = "training.job", "training.saved", "training.message"
VISITED, REFUSED, TIMELINE = "training.visited", "training.refused", "training.timeline"
FIELDS = [f.name for f in dataclasses.fields(training.TrainConfig) if f.name not in ("d_k", "d_v")]
BOTH = "both"
DEFAULT = training.PRESETS["reverse"]  # the widgets' defaults; the link holds what differs
LIVE_EVERY_S = 1.0  # how often the live view reads its task's progress (the training runs in a worker)
# Between two reads the live view waits this long for the end (`LabJob.wait_end`; the reports in between
# do not end the wait): the end is drawn at once, not at the next read. Waking on any report instead, it
# returned within milliseconds of the first and the end waited for the next read: 0.5 s on average.
END_WAIT_S = 0.8
# How often the live figures are drawn. Not for Python's lock (the training runs in another process)
# but for the machine's cores: every redraw costs the server and, more, the browser (which on a
# classroom laptop or this 2-core server shares the cores), and the worker trains at a lower priority
# than both. Measured (reverse preset, PyTorch, load 14-16): figures every second, 9.3 s of steps and
# 26 s from Start to the end; no live figures, 1.4 s and 6.9 s.
FIGURES_EVERY_S = 5.0
# The live figures are first drawn once the task has run this long (at the first redraw after it): a
# shorter run is drawn once, at its end. Drawn at Start they showed step 0 for the second a one-second run
# lasts, the server building and the browser drawing them while the lower-priority worker trained.
FIGURES_AFTER_S = FIGURES_EVERY_S / 2
# Nor are they rebuilt when the run should end within this many seconds (`figures_due`): its final view
# comes first. Measured on live servers (reverse and copy, PyTorch, load 8-10, 28 Nov): a live redraw
# sent 1.3 s and 3.9 s before the end kept Chromium busy 5.5 s and 6.8 s, which delayed the final view
# by as much and stalled the browser's timer that asks the live status for the end (seen 1.9 s late).
FIGURES_LAST_S = FIGURES_EVERY_S
LIVE_DRAWN = "training.live_drawn"  # (snapshots drawn, their figures): rebuilt when a snapshot comes
LOOK_FOR = {
    "reverse": "position i must output the token at T−1−i: watch an anti-diagonal (the **mirror** score) appear.",
    "copy": "position i outputs its own token; the residual stream already carries it, so attention may stay diffuse.",
    "sort": "position i outputs the i-th smallest token: attention spreads over every token (a bag of tokens) "
    "and the MLP reads the order off it — watch the entropy stay high.",
    "induction": "random tokens in which a span occurs twice; only the second copy is predictable. In layer 0 a "
    "**previous-token** head (the sub-diagonal) forms, in layer 1 an **induction** head (on the probe `[r, r]`, "
    "the stripe half a sequence back) — and the loss, flat at first, drops suddenly.",
}


EXAMPLE_NOTE = (
    "One training sequence drawn as the task draws them (seed 0), and what each position must output. "
    "The heatmaps will show the attention on the probe sequence, drawn the same way but held out of training.",
    "One training sequence drawn as the task draws them (seed 0): a span occurs twice; only the targets inside "
    "the second copy count (the others are chance, shown ·). The heatmaps will show the attention on the "
    "probe `[r, r]`: a random span written twice.",
)


def key(name: str) -> str:
    return PREFIX + name


def shown(value) -> str:
    """A value as the link spells it."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def framework_name(fw: str) -> str:
    """The radio's label, which is also how the link spells the choice."""
    return "Both" if fw == BOTH else label(fw)


def apply(config: training.TrainConfig) -> None:
    for name in FIELDS:
        st.session_state[key(name)] = getattr(config, name)


def on_task() -> None:
    apply(training.PRESETS[st.session_state[key("task")]])


def first_visit() -> dict[str, str]:
    """Once per session. Rewrites an old link's `lab_<field>` to `training.<field>`; a link that
    names only a task opens with that task's preset (the widgets' defaults are the reverse preset
    and the link holds what differs). Returns the link's training values, to name those refused."""
    if VISITED in st.session_state:
        return {}
    st.session_state[VISITED] = True
    old = {k: st.query_params[k] for k in st.query_params if k.startswith(OLD_PREFIX)}
    for k, raw in old.items():
        name = k.removeprefix(OLD_PREFIX)
        del st.query_params[k]
        st.query_params[key(name)] = raw
        value = _parse(name, raw)
        if value is not None:  # the widget starts from it (a value it refuses is named below)
            st.session_state[key(name)] = value
    link = {k: st.query_params[k] for k in st.query_params if k.startswith(PREFIX)}
    if set(link) - {key("framework")} == {key("task")} and link[key("task")] in training.PRESETS:
        preset = training.PRESETS[link[key("task")]]
        differ = {
            key(n): shown(getattr(preset, n)) for n in FIELDS if getattr(preset, n) != getattr(DEFAULT, n)
        }
        # Written before the widgets bind, so they start from it and the link is complete.
        st.query_params.update(differ)
        apply(preset)
        link |= differ
    return link


def _parse(name: str, raw: str):
    """An old link's value as its widget holds it; None when it cannot be read."""
    if name == "framework":
        names = {framework_name(fw): fw for fw in [*controls.installed_frameworks(), BOTH]}
        return names.get(raw)
    if name not in FIELDS:
        return None
    default = getattr(DEFAULT, name)
    try:
        if isinstance(default, bool):
            return {"true": True, "false": False}.get(raw.lower())
        if isinstance(default, int):
            return links.read_number(raw, *training.LIMITS[name])
        if isinstance(default, float):
            return links.read_number(raw, 1e-5, training.LR_MAX, None)
    except ValueError:
        return None
    return (
        raw
        if raw
        in {"task": training.TASKS, "optimizer": training.OPTIMIZERS, "dtype": training.DTYPES}.get(name, ())
        else None
    )


def refused(link: dict[str, str]) -> list[str]:
    """The link's values the widgets did not take (out of range, not an option)."""
    out = []
    for k, raw in link.items():
        value = st.session_state.get(k)
        same = (framework_name(value) if k == key("framework") else shown(value)) == raw
        if isinstance(value, float) and not same:
            try:
                same = float(raw) == value
            except ValueError:
                same = False
        if not same:
            out.append(f"{k.removeprefix(PREFIX)}={raw}")
    return out


def config_from_widgets(frameworks: list[str]) -> tuple[training.TrainConfig | None, str | None]:
    """The widgets' configuration, checked against the server's limits; or None and why not."""
    try:
        config = training.TrainConfig(**{name: st.session_state[key(name)] for name in FIELDS})
        training.check_size(config, len(frameworks))
    except SpecError as error:
        return None, str(error)
    return config, None


class LabJob:
    """The page's view of its training task: the runs so far, read from the task's partial results
    (`schedule.training_runs`) while it trains, its value (`schedule.Trained`) once it ended.

    Attributes:
        handle: the task's `attnviz.exec.Handle`.
        config, frameworks: what it trains (a "Run again" starts the same).
        failure: the `TaskError` that ended it without a value (the worker stopped, its time or
            memory budget); the runs then are what its reports carried.
    """

    def __init__(self, handle: ex.Handle, config: training.TrainConfig, frameworks: list[str]):
        self.handle, self.config, self.frameworks = handle, config, list(frameworks)
        self.failure: ex.TaskError | None = None
        self._trained: schedule.Trained | None = None
        self._runs: dict[str, training.TrainingRun] = {}
        self._joined = 0  # partials joined into `_runs`

    @property
    def running(self) -> bool:
        return not self.handle.done()

    @property
    def runs(self) -> dict[str, training.TrainingRun]:
        """framework → its run: the finished runs (with their weights) once the task returned,
        else the runs so far."""
        self._read()
        return self._trained.runs if self._trained is not None else self._runs

    @property
    def ended(self) -> str | None:
        """Why training ended before its last step ("stopped", "time limit (…)"), else None."""
        return self._trained.ended if self._trained is not None else None

    @property
    def error(self) -> str | None:
        """The run's own error (a diverged loss), what was trained being kept; else None."""
        return self._trained.error if self._trained is not None else None

    @property
    def state(self) -> str:
        """ "waiting for a worker", "starting", "training", or how it ended."""
        p = self.handle.progress()
        if p.state == "queued":
            return "waiting for a free worker"
        if p.state == "running":
            return "training" if p.partials else "starting (the worker loads its framework)"
        return "ended" if self.failure is not None else "done"

    @property
    def progress(self) -> ex.Progress:
        """The task's progress now: its state, steps done of all, seconds it has run."""
        return self.handle.progress()

    def wait_end(self, timeout: float) -> bool:
        """Wait at most `timeout` seconds for the task to end, through any number of reports; whether it ended."""
        deadline = time.monotonic() + timeout
        while not self.handle.done():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.handle.wait(left)
        return True

    def stop(self) -> None:
        self.handle.stop()

    def _read(self) -> None:
        partials = self.handle.progress().partials
        if len(partials) > self._joined:
            self._runs = schedule.training_runs(partials)
            self._joined = len(partials)
        if self.handle.done() and self._trained is None and self.failure is None:
            try:
                self._trained = self.handle.result(timeout=0)
            except ex.TaskError as error:
                self.failure = error


def start(config: training.TrainConfig, frameworks: list[str]) -> None:
    """Start button: a new run in a worker under the server's limits (a refusal is shown, nothing starts).

    The run's size was checked before (`config_from_widgets`); the server's trainings at once
    (`Busy`), its time and memory are the execution layer's. It ends by itself, keeping what it
    learned, at the training time limit, which comes before the task's own.
    """
    stop()
    st.session_state.pop(MESSAGE, None)
    limits = ex.Limits.from_env()
    seconds = min(training.TrainLimits.from_env().seconds, max(1.0, limits.seconds - limits.grace_s))
    try:
        handle = door.start(schedule.train, config, list(frameworks), seconds, limits=limits, training=True)
    except SpecError as error:  # Busy (the server's trainings), an argument that cannot travel
        st.session_state[MESSAGE] = str(error)
        return
    st.session_state[JOB] = LabJob(handle, config, frameworks)
    for k in (SAVED, TIMELINE, LIVE_DRAWN):
        st.session_state.pop(k, None)


def run_again() -> None:
    """The failure's "Run again": the same configuration once more."""
    job = st.session_state.get(JOB)
    if job is not None:
        start(job.config, job.frameworks)


def figures_due(progress: ex.Progress) -> bool:
    """Whether the live figures are worth a new build now: the task has trained `FIGURES_AFTER_S`
    and, at its pace so far, has more than `FIGURES_LAST_S` seconds to go (else its final view,
    drawn at the end, comes before the browser would have drawn these)."""
    if progress.state != "running" or progress.elapsed_s < FIGURES_AFTER_S:
        return False
    if not progress.total or progress.done <= 0:
        return True  # no pace yet: the run has trained long without a step, it is not about to end
    left_s = progress.elapsed_s * (progress.total - progress.done) / progress.done
    return left_s > FIGURES_LAST_S


def live_figures(runs: dict, build, *, due: bool = True) -> dict | None:
    """The live figures of `runs`: `build()`'s, rebuilt only when a snapshot came since the last and
    a rebuild is `due`; else the last ones built (None before the first)."""
    count = sum(len(run.scores) for run in runs.values())
    drawn = st.session_state.get(LIVE_DRAWN)
    if due and (drawn is None or drawn[0] != count):
        drawn = st.session_state[LIVE_DRAWN] = (count, build())
    return None if drawn is None else drawn[1]


def stop() -> None:
    job = st.session_state.get(JOB)
    if job is not None:
        job.stop()


def save(run: training.TrainingRun) -> None:
    """Save button: the run saved once for this session's Pretrained page."""
    sid = session_id() or "local"  # AppTest and bare mode have no session id: one local owner
    try:
        st.session_state[SAVED] = training.share(run, training.owner_of(sid))
    except SpecError as error:
        st.session_state[MESSAGE] = str(error)


def model_shape(config: training.TrainConfig, frameworks: list[str]) -> str:
    """One sentence: the model Start builds, and where it trains."""
    d_k, d_v = config.head_dims
    size = training.estimate(config, len(frameworks))
    parts = [
        f"{config.n_layers} layer{'s' * (config.n_layers != 1)} × {config.n_heads} head{'s' * (config.n_heads != 1)}",
        f"d_model {config.d_model} (d_k {d_k}, d_v {d_v} per head)",
        f"vocabulary {config.vocab}",
        f"sequences of {config.seq_len}",
        "causal mask" if config.causal else "no mask",
        "an MLP after attention" if config.mlp else "no MLP",
        f"{size.params:,} parameters",
    ]
    where = " and ".join(label(fw) for fw in frameworks)
    return (
        f"{' · '.join(parts)}. {config.steps:,} steps of batch {config.batch} with {config.optimizer} "
        f"(lr {config.lr:g}) in {where}, a snapshot every {config.snapshot_every} steps."
    )


def example(config: training.TrainConfig) -> dict[str, list[str]]:
    """One training sequence of the task and its targets, as columns `position`, `input`, `target`
    (a target that does not count in the loss: "·")."""
    x, second = training.data.sample(config, np.random.default_rng(0), 1)
    batch = training.data.make_batch(config, x, second)
    counted = batch.loss_w[0] > 0
    return {
        "position": [str(i) for i in range(config.seq_len)],
        "input": [str(t) for t in batch.x[0]],
        "target": [str(t) if c else "·" for t, c in zip(batch.y[0], counted, strict=True)],
    }
