"""Training lab: train a tiny transformer live and watch its attention heads form."""

import pandas as pd
import streamlit as st

from attnviz import exec as ex
from attnviz import training
from attnviz.app import controls
from attnviz.app.frame import door, session
from attnviz.app.frame.shell import routed
from attnviz.app.training import figures as training_plots
from attnviz.app.training import outputs
from attnviz.app.training import state as lab
from attnviz.frameworks import label

routed("training")  # inside app.py's shell, also when Streamlit's pages/ routing ran this file alone
st.title("Training lab")
st.caption(
    "A tiny transformer learns a task while you watch — in PyTorch, TensorFlow, or both side by side from "
    "the same initial weights, with attnviz's own attention layer. The heatmaps show how every head attends "
    "on a fixed probe sequence; the scores say how close each head is to a known pattern."
)
NUMBERS = [
    ("seq_len", "Sequence length"), ("vocab", "Vocabulary"), ("n_layers", "Layers"), ("n_heads", "Heads"),
    ("d_model", "d_model"), ("batch", "Batch"), ("steps", "Steps"), ("snapshot_every", "Snapshot every"),
    ("seed", "Training seed"),
]  # fmt: skip


def sidebar() -> tuple[training.TrainConfig | None, list[str]]:
    """The training controls, each bound to the link (a change replaces the URL, no history entry)."""
    available = controls.installed_frameworks()
    choices = available + ([lab.BOTH] if len(available) > 1 else [])
    bound = {"bind": "query-params"}
    d = lab.DEFAULT
    with st.sidebar:
        session.value(
            st.selectbox, "Task", training.TASKS, index=training.TASKS.index(d.task), key=lab.key("task"), on_change=lab.on_task,
            **bound,
        )  # fmt: skip
        st.caption("Choosing a task loads settings that reach its target (docs/training.md).")
        framework = st.radio(
            "Framework", choices, format_func=lab.framework_name, key=lab.key("framework"),
            help="Both: PyTorch and TensorFlow side by side, from the same initial weights and batches.", **bound,
        )  # fmt: skip
        c1, c2 = st.columns(2)
        for i, (name, text) in enumerate(NUMBERS):
            lo, hi = training.LIMITS[name]
            (c1 if i % 2 == 0 else c2).number_input(
                text, lo, hi, value=getattr(d, name), step=1, key=lab.key(name), **bound
            )
        st.number_input(
            "Learning rate", min_value=1e-5, max_value=training.LR_MAX, value=d.lr, format="%.4g", step=0.001,
            key=lab.key("lr"), **bound,
        )  # fmt: skip
        c1, c2 = st.columns(2)
        for column, name, text, options in (
            (c1, "optimizer", "Optimizer", training.OPTIMIZERS),
            (c2, "dtype", "dtype", training.DTYPES),
        ):
            column.selectbox(text, options, index=options.index(getattr(d, name)), key=lab.key(name), **bound)
        st.toggle("MLP after attention", value=d.mlp, key=lab.key("mlp"), **bound)
        st.toggle("Causal mask", value=d.causal, key=lab.key("causal"), **bound)
        st.caption(
            "The configuration is in the page's link; the trained weights are not (they live in this "
            "browser session only — download the checkpoint to keep them)."
        )
    frameworks = available if framework == lab.BOTH else [framework]
    config, error = lab.config_from_widgets(frameworks)
    if error:
        st.sidebar.error(controls.escape_markdown(error))
    return config, frameworks


def draw(runs: dict, figs: dict, index: int | None, live: bool = False) -> None:
    """The curves, then per layer its heads' heatmaps (frameworks side by side), then (but while
    training, `live`) the scores' chart and table."""
    if live:  # the walk saw the bar at step 110 beside heatmaps of step 0: say the figures lag
        st.caption(f"The figures show the latest snapshot, redrawn every {lab.FIGURES_EVERY_S:g} s.")
    st.plotly_chart(figs["curves"], width="stretch", key="training.curves")
    both = len(runs) > 1
    n_layers = next(iter(runs.values())).config.n_layers
    for layer in range(n_layers):
        for column, fw in zip(st.columns(len(runs)), runs, strict=True):
            step, fig = figs[f"heads.{fw}.{layer}"]
            with column:
                name = f"{label(fw)} · " if both else ""
                st.markdown(
                    f"**{name}Layer {layer}** · step {step} · rows: query `position:token`, columns: key"
                )
                st.plotly_chart(fig, width="stretch", key=f"training.heads.{fw}.{layer}")
    if live:  # the scores' chart and table are the timeline's: redrawn every few seconds they cost the
        return  # browser the most, and the lower-priority worker pays for it (docs/training.md)
    for column, (fw, run) in zip(st.columns(len(runs)), runs.items(), strict=True):
        with column:
            if both:
                st.markdown(f"**{label(fw)}** — pattern scores and entropy")
            st.plotly_chart(figs[f"scores.{fw}"], width="stretch", key=f"training.scores.{fw}")
            now = run.scores[-1 if index is None else index]
            st.dataframe(training_plots.score_table(now), hide_index=True, width="stretch")


def status_line(job: lab.LabJob) -> None:
    """One progress bar per framework: state, steps, seconds of steps, held-out accuracy."""
    runs = job.runs
    if not runs:
        st.progress(0.0, text=f"{job.state[:1].upper()}{job.state[1:]}…")
        return
    for fw, run in runs.items():
        acc = run.scores[-1]["held_out_accuracy"] if run.scores else float("nan")
        if job.running:
            state = "training"
        elif isinstance(job.failure, ex.Stopped):  # the Stop, its worker ended when it did not stop in time
            state = "stopped"
        elif job.failure is not None:
            state = "ended"
        else:
            state = "stopped" if run.stopped else "finished"
        st.progress(
            run.steps_done / run.config.steps,
            text=f"{label(fw)}: {state} · step {run.steps_done} of {run.config.steps} · "
            f"{run.elapsed_s:.1f} s of steps · held-out accuracy {acc:.1%}",
        )


@st.fragment(run_every=lab.LIVE_EVERY_S)
def live_status() -> None:
    """While training: the progress, read from the worker's reports every second; the timeline
    view at once when the task ends."""
    job = st.session_state.get(lab.JOB)
    if job is None:
        return
    if not job.running:
        st.rerun()
    status_line(job)
    if job.wait_end(lab.END_WAIT_S):  # the timeline view as soon as it ends
        st.rerun()


@st.fragment(run_every=lab.FIGURES_EVERY_S)
def live_figures() -> None:
    """While training: the figures of the latest snapshot, every `lab.FIGURES_EVERY_S` seconds once the
    task has run `lab.FIGURES_AFTER_S`, rebuilt only when a snapshot came since and the run is not about
    to end (`lab.figures_due`: then the last ones stay)."""
    job = st.session_state.get(lab.JOB)
    if job is None or not job.running:
        return
    runs = job.runs
    if runs and all(run.scores for run in runs.values()):
        figs = lab.live_figures(
            runs, lambda: training_plots.live_view(runs), due=lab.figures_due(job.progress)
        )
        if figs is not None:
            draw(runs, figs, None, live=True)


def finished(job: lab.LabJob) -> None:
    runs = job.runs
    if job.failure is not None:
        door.show_failure(job.failure, key="training.again", on_again=lab.run_again)
    status_line(job)
    if job.error:
        st.warning(
            controls.escape_markdown(job.error) + " Training stopped; what it learned so far is shown."
        )
    elif job.ended and job.ended != "stopped":
        st.warning(f"Training ended early: {job.ended}. What it learned so far is shown.")
    if not runs or not all(run.scores for run in runs.values()):
        return
    steps = [s for s, _ in next(iter(runs.values())).snapshots]
    step = st.select_slider("Timeline: snapshot at step", steps, value=steps[-1], key=lab.TIMELINE)
    index = steps.index(step)
    draw(runs, training_plots.view(runs, index, step), index)
    outputs.downloads(runs)
    if all(run.finished for run in runs.values()):  # the weights came back (not after a failure)
        outputs.pretrained_link(runs)


def before_start(config: training.TrainConfig | None, frameworks: list[str]) -> None:
    """What Start will train: the task's example sequence and the model's shape."""
    if config is None:
        return
    st.markdown("**What will be trained**")
    st.markdown(controls.escape_markdown(lab.model_shape(config, frameworks)))
    example = pd.DataFrame(lab.example(config)).set_index("position").T  # positions across, as the heatmaps
    st.table(example)
    st.caption(lab.EXAMPLE_NOTE[config.task == "induction"])
    st.caption(
        "Press **Start**: snapshots of the attention are taken every few steps; afterwards a timeline scrubs them."
    )


link = lab.first_visit()
config, frameworks = sidebar()
if link:
    st.session_state[lab.REFUSED] = lab.refused(link)
if st.session_state.get(lab.REFUSED):
    st.warning("Left out of the link (values not allowed here): " + ", ".join(st.session_state[lab.REFUSED]))
task = st.session_state[lab.key("task")]
st.markdown(f"**{task}** — {lab.LOOK_FOR[task]}")
c1, c2, _ = st.columns([1, 1, 4])
job = st.session_state.get(lab.JOB)
session.button(
    "Start", type="primary", disabled=config is None, on_click=lab.start, args=(config, frameworks),
    key="training.start", where=c1,
)  # fmt: skip
session.button("Stop", disabled=job is None or not job.running, on_click=lab.stop, key="training.stop", where=c2)  # fmt: skip
if st.session_state.get(lab.MESSAGE):
    st.warning(controls.escape_markdown(st.session_state[lab.MESSAGE]), icon=":material/hourglass:")
if job is None:
    before_start(config, frameworks)
elif job.running:
    live_status()
    live_figures()
else:
    finished(job)
