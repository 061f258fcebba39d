"""Training lab: train a tiny transformer live and watch its attention heads form."""

import dataclasses
import io
import zipfile

import streamlit as st

from attnviz import training, training_plots, viz
from attnviz.errors import SpecError
from attnviz.frameworks import label
from attnviz.ui import controls
from attnviz.ui.routing import ensure_navigation

ensure_navigation()
st.title("Training lab")
st.caption(
    "A tiny transformer learns a task while you watch — in PyTorch, TensorFlow, or both side by side from "
    "the same initial weights, with attnviz's own attention layer. The heatmaps show how every head attends "
    "on a fixed probe sequence; the scores say how close each head is to a known pattern."
)

JOB, LINK = "lab.job", "lab.shared"
FIELDS = [f.name for f in dataclasses.fields(training.TrainConfig) if f.name not in ("d_k", "d_v")]
BOTH = "both"
LOOK_FOR = {
    "reverse": "position i must output the token at T−1−i: watch an anti-diagonal (the **mirror** score) appear.",
    "copy": "position i outputs its own token; the residual stream already carries it, so attention may stay diffuse.",
    "sort": "position i outputs the i-th smallest token: attention spreads over every token (a bag of tokens) "
    "and the MLP reads the order off it — watch the entropy stay high.",
    "induction": "random tokens in which a span occurs twice; only the second copy is predictable. In layer 0 a "
    "**previous-token** head (the sub-diagonal) forms, in layer 1 an **induction** head (on the probe `[r, r]`, "
    "the stripe half a sequence back) — and the loss, flat at first, drops suddenly.",
}


def _parse(name: str, raw: str):
    """A URL value for `name`, or ValueError."""
    default = getattr(training.TrainConfig(), name)
    if isinstance(default, bool):
        if raw not in ("true", "false"):
            raise ValueError(raw)
        return raw == "true"
    if isinstance(default, int):
        value = int(raw)
        lo, hi = training.LIMITS[name]
        if not lo <= value <= hi:
            raise ValueError(raw)
        return value
    if isinstance(default, float):
        return float(raw)
    return raw


def _apply(config: training.TrainConfig) -> None:
    for name in FIELDS:
        st.session_state[f"lab.{name}"] = getattr(config, name)


def _first_visit() -> None:
    """Once per session: start the widgets from the link (a bad value is left out and named)."""
    if "lab.visited" in st.session_state:
        return
    st.session_state["lab.visited"] = True
    task = st.query_params.get("lab_task")
    preset = training.PRESETS.get(task, training.PRESETS["reverse"])
    _apply(preset)
    refused = []
    for name in FIELDS:
        raw = st.query_params.get(f"lab_{name}")
        if raw is not None and name != "task":
            try:
                st.session_state[f"lab.{name}"] = _parse(name, raw)
            except ValueError:
                refused.append(f"{name}={raw}")
    framework = st.query_params.get("lab_framework")
    if framework in (*controls.installed_frameworks(), BOTH):
        st.session_state["lab.framework"] = framework
    if task is not None and task not in training.PRESETS:
        refused.append(f"task={task}")
    st.session_state["lab.refused"] = refused


def _on_task() -> None:
    _apply(training.PRESETS[st.session_state["lab.task"]])


def sidebar() -> tuple[training.TrainConfig | None, list[str]]:
    available = controls.installed_frameworks()
    choices = available + ([BOTH] if len(available) > 1 else [])
    with st.sidebar:
        st.selectbox("Task", training.TASKS, key="lab.task", on_change=_on_task)
        st.caption("Choosing a task loads settings that reach its target (docs/training.md).")
        framework = st.radio(
            "Framework",
            choices,
            format_func=lambda fw: "Both, side by side" if fw == BOTH else label(fw),
            key="lab.framework",
        )
        c1, c2 = st.columns(2)
        for i, (name, text) in enumerate(
            [("seq_len", "Sequence length"), ("vocab", "Vocabulary"), ("n_layers", "Layers"), ("n_heads", "Heads"),
             ("d_model", "d_model"), ("batch", "Batch"), ("steps", "Steps"), ("snapshot_every", "Snapshot every"),
             ("seed", "Seed")]
        ):  # fmt: skip
            lo, hi = training.LIMITS[name]
            (c1 if i % 2 == 0 else c2).number_input(text, lo, hi, step=1, key=f"lab.{name}")
        st.number_input(
            "Learning rate",
            min_value=1e-5,
            max_value=training.LR_MAX,
            format="%.4g",
            step=0.001,
            key="lab.lr",
        )
        c1, c2 = st.columns(2)
        c1.selectbox("Optimizer", training.OPTIMIZERS, key="lab.optimizer")
        c2.selectbox("dtype", training.DTYPES, key="lab.dtype")
        st.toggle("MLP after attention", key="lab.mlp")
        st.toggle("Causal mask", key="lab.causal")
        st.caption(
            "The configuration is in the page's link; the trained weights are not (they live in this "
            "browser session only — download the checkpoint to keep them)."
        )
    values = {name: st.session_state[f"lab.{name}"] for name in FIELDS}
    wanted = {f"lab_{k}": str(v).lower() if isinstance(v, bool) else str(v) for k, v in values.items()}
    wanted["lab_framework"] = framework
    if any(st.query_params.get(k) != v for k, v in wanted.items()):
        st.query_params.from_dict({**{k: st.query_params.get_all(k) for k in st.query_params}, **wanted})
    frameworks = available if framework == BOTH else [framework]
    try:
        config = training.TrainConfig(**values)
        training.check_budget(config)
    except SpecError as error:
        st.sidebar.error(controls.escape_markdown(str(error)))
        return None, frameworks
    return config, frameworks


def start(config: training.TrainConfig, frameworks: list[str]) -> None:
    stop()
    for fw in frameworks:
        controls.load_framework(fw)
    st.session_state[JOB] = training.TrainingJob(config, frameworks).start()
    st.session_state.pop(LINK, None)
    st.session_state.pop("lab.timeline", None)


def stop() -> None:
    job = st.session_state.get(JOB)
    if job is not None:
        job.stop()


def heatmaps(runs: dict, index: int | None) -> None:
    """Every layer's heads, layers side by side, at snapshot `index` (None: the latest)."""
    for fw, run in runs.items():
        done = len(run.scores)  # snapshots are appended before their scores
        step, attn = run.snapshots[done - 1 if index is None else index]
        tokens = training_plots.token_labels(run.probe[0])
        if len(runs) > 1:
            st.markdown(f"**{label(fw)}**")
        cols = st.columns(max(2, attn.shape[0]))
        for layer, col in zip(range(attn.shape[0]), cols, strict=False):
            col.markdown(f"**Layer {layer}** · step {step} · rows: query `position:token`, columns: key")
            col.plotly_chart(
                viz.head_grid(attn[layer], tokens, tokens, title=""),
                width="stretch",
                key=f"lab.heads.{fw}.{layer}",
            )


def scores(runs: dict, index: int | None, marker: int | None) -> None:
    cols = st.columns(len(runs))
    for col, (fw, run) in zip(cols, runs.items(), strict=True):
        with col:
            if len(runs) > 1:
                st.markdown(f"**{label(fw)}** — pattern scores and entropy")
            st.plotly_chart(
                training_plots.score_lines(run, marker=marker), width="stretch", key=f"lab.scores.{fw}"
            )
            now = run.scores[-1 if index is None else index]
            st.dataframe(training_plots.score_table(now), hide_index=True, width="stretch")


def status_line(runs: dict) -> None:
    for fw, run in runs.items():
        acc = run.scores[-1]["held_out_accuracy"]
        state = "stopped" if run.stopped else ("finished" if run.finished else "training")
        st.progress(
            run.steps_done / run.config.steps,
            text=f"{label(fw)}: {state} · step {run.steps_done} of {run.config.steps} · "
            f"{run.elapsed_s:.1f} s of steps · held-out accuracy {acc:.1%}",
        )


@st.fragment(run_every=0.8)
def live() -> None:
    job = st.session_state.get(JOB)
    if job is None:
        return
    if not job.running:
        st.rerun()  # finished: draw the timeline view
    status_line(job.runs)
    st.plotly_chart(training_plots.curves(_names(job.runs)), width="stretch", key="lab.curves")
    heatmaps(job.runs, None)
    scores(job.runs, None, None)


def _names(runs: dict) -> dict:
    return {label(fw): run for fw, run in runs.items()}


def downloads(runs: dict) -> None:
    cols = st.columns(3)
    for fw, run in runs.items():
        name = f"attnviz-{run.config.task}-{fw}"
        cols[0].download_button(
            f"History CSV ({label(fw)})",
            run.history_csv(),
            f"{name}-history.csv",
            "text/csv",
            key=f"lab.csv.{fw}",
        )
        cols[1].download_button(
            f"Snapshots .npz ({label(fw)})", run.snapshots_npz(), f"{name}-snapshots.npz", key=f"lab.npz.{fw}"
        )
        cols[2].download_button(
            f"Checkpoint .zip ({label(fw)})",
            checkpoint_zip(run),
            f"{name}.zip",
            "application/zip",
            key=f"lab.zip.{fw}",
        )


def checkpoint_zip(run: training.TrainingRun) -> bytes:
    """`config.json` + `model.safetensors` in a zip (`load_checkpoint` opens the unpacked folder)."""
    import tempfile
    from pathlib import Path

    buf = io.BytesIO()
    with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(buf, "w") as zf:
        folder = run.save(Path(tmp) / "checkpoint")
        for file in sorted(folder.iterdir()):
            zf.write(file, f"checkpoint/{file.name}")
    return buf.getvalue()


def pretrained_link(runs: dict) -> None:
    fw, run = next(iter(runs.items()))
    if st.button(f"Open the {label(fw)} run on the Pretrained page", key="lab.share"):
        st.session_state[LINK] = training.share(run)
    run_id = st.session_state.get(LINK)
    if run_id:
        try:
            st.page_link("pages/pretrained.py", label="Pretrained page →", query_params={"trained": run_id})
        except st.errors.StreamlitAPIException:  # this page runs outside app.py's navigation
            st.caption(f"Saved on this server as `{run_id}`.")
        st.caption("The saved copy stays on this server until it restarts; the link works only here.")


def finished(job) -> None:
    runs = job.runs
    status_line(runs)
    if job.error:
        st.warning(
            controls.escape_markdown(job.error) + " Training stopped; what it learned so far is shown."
        )
    first = next(iter(runs.values()))
    steps = [s for s, _ in first.snapshots]
    step = st.select_slider("Timeline: snapshot at step", steps, value=steps[-1], key="lab.timeline")
    index = steps.index(step)
    st.plotly_chart(training_plots.curves(_names(runs), marker=step), width="stretch", key="lab.curves")
    heatmaps(runs, index)
    scores(runs, index, step)
    downloads(runs)
    pretrained_link(runs)


_first_visit()
config, frameworks = sidebar()
if st.session_state.get("lab.refused"):
    st.warning("Left out of the link (not allowed values): " + ", ".join(st.session_state["lab.refused"]))
task = st.session_state["lab.task"]
st.markdown(f"**{task}** — {LOOK_FOR[task]}")
c1, c2, _ = st.columns([1, 1, 4])
job = st.session_state.get(JOB)
c1.button(
    "Start",
    type="primary",
    disabled=config is None,
    on_click=start,
    args=(config, frameworks),
    key="lab.start",
)
c2.button("Stop", disabled=job is None or not job.running, on_click=stop, key="lab.stop")
if job is None:
    st.info(
        "Press **Start** to train. Snapshots of the attention are taken every few steps; afterwards a timeline scrubs them."
    )
elif job.running:
    live()
else:
    finished(job)
