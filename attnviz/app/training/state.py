"""The Training lab's state, link and callbacks (page.py draws; this module decides).

Keys: every widget is `training.<field>` and bound to the same URL parameter;
links written before this prefix (`lab_<field>`) are rewritten once, on the first
visit. A run starts through `attnviz.training.start_job` (the server's limits),
ends with its session (`attnviz.app.frame.session.session_alive`), and is saved for the
Pretrained page once, visible to this session only (`training.share`).
"""

from __future__ import annotations

import dataclasses
import functools
import time

import streamlit as st

from attnviz import training
from attnviz.app import controls
from attnviz.app.frame import links, results
from attnviz.app.frame.session import session_alive, session_id
from attnviz.errors import SpecError
from attnviz.frameworks import label

PREFIX, OLD_PREFIX = "training.", "lab_"
JOB, SAVED, MESSAGE = "training.job", "training.saved", "training.message"
VISITED, REFUSED, TIMELINE, DRAWN = (
    "training.visited",
    "training.refused",
    "training.timeline",
    "training.drawn",
)
FIELDS = [f.name for f in dataclasses.fields(training.TrainConfig) if f.name not in ("d_k", "d_v")]
BOTH = "both"
DEFAULT = training.PRESETS["reverse"]  # the widgets' defaults; the link holds what differs
REDRAW_SHARE = 0.1  # live figures take at most this share of the time (they hold the training's lock)
REDRAW_MIN_S = 2.0
REDRAW_EVERY_S = 5.0  # how often the live figures' fragment wakes (re-sending figures costs time too)
FIRST_DRAW_S = 5.0  # the first live figures after this much training (about 10 × their cost)
LOOK_FOR = {
    "reverse": "position i must output the token at T−1−i: watch an anti-diagonal (the **mirror** score) appear.",
    "copy": "position i outputs its own token; the residual stream already carries it, so attention may stay diffuse.",
    "sort": "position i outputs the i-th smallest token: attention spreads over every token (a bag of tokens) "
    "and the MLP reads the order off it — watch the entropy stay high.",
    "induction": "random tokens in which a span occurs twice; only the second copy is predictable. In layer 0 a "
    "**previous-token** head (the sub-diagonal) forms, in layer 1 an **induction** head (on the probe `[r, r]`, "
    "the stripe half a sequence back) — and the loss, flat at first, drops suddenly.",
}


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


def start(config: training.TrainConfig, frameworks: list[str]) -> None:
    """Start button: a new run under the server's limits (a refusal is shown, nothing starts)."""
    stop()
    st.session_state.pop(MESSAGE, None)
    for fw in frameworks:
        controls.load_framework(fw)
    alive = functools.partial(session_alive, session_id())
    give_back = results.hold_slot()  # a training counts against the same slots as every other run
    limit = training.TrainLimits.from_env().runs
    if give_back is None and training.running_jobs() >= limit:  # the training limit's own message
        st.session_state[MESSAGE] = str(training.BusyError(training.running_jobs(), limit))
        return
    if give_back is None:
        st.session_state[MESSAGE] = (
            f"The server's computation slots are busy (at most {results.MAX_CONCURRENT_RUNS} runs at once, "
            f"{results.MAX_TRAINING_SLOTS} of them trainings); try again when another run has finished."
        )
        return
    try:
        st.session_state[JOB] = training.start_job(config, frameworks, alive=alive, on_end=give_back)
    except SpecError as error:  # BusyError, BudgetError: say so; the previous run's view stays
        give_back()
        st.session_state[MESSAGE] = str(error)
        return
    for k in (SAVED, TIMELINE, DRAWN):
        st.session_state.pop(k, None)


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


def redraw_due(job: training.TrainingJob, now: float | None = None) -> bool:
    """Whether the live figures should be rebuilt now: at most `REDRAW_SHARE` of the time is spent
    drawing them (they compete with the training thread for Python's lock). The first waits
    `FIRST_DRAW_S` into the run, so a short run is not slowed by figures it would outrun."""
    drawn = st.session_state.get(DRAWN)
    now = time.perf_counter() if now is None else now
    if drawn is None:
        return job.started_at is not None and time.monotonic() - job.started_at >= FIRST_DRAW_S
    return now >= drawn["at"] + max(REDRAW_MIN_S, drawn["cost"] / REDRAW_SHARE)


def remember_drawn(figures: dict, started: float) -> None:
    """Keep the live figures just built (re-sent unchanged until the next redraw) and what they cost."""
    now = time.perf_counter()
    st.session_state[DRAWN] = {"at": now, "cost": now - started, "figures": figures}


def drawn_figures() -> dict:
    drawn = st.session_state.get(DRAWN)
    return drawn["figures"] if drawn else {}
