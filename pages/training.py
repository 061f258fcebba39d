"""Training lab: train a tiny transformer live and watch its attention heads form."""

import dataclasses
import io
import os
import zipfile

import streamlit as st

from attnviz import pretrained, training
from attnviz.errors import SpecError
from attnviz.frameworks import label
from attnviz.plots import training as training_plots
from attnviz.plots.heatmaps import head_grid
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
DEFAULT = training.PRESETS["reverse"]  # the widgets' defaults; the link holds what differs
LOOK_FOR = {
    "reverse": "position i must output the token at T−1−i: watch an anti-diagonal (the **mirror** score) appear.",
    "copy": "position i outputs its own token; the residual stream already carries it, so attention may stay diffuse.",
    "sort": "position i outputs the i-th smallest token: attention spreads over every token (a bag of tokens) "
    "and the MLP reads the order off it — watch the entropy stay high.",
    "induction": "random tokens in which a span occurs twice; only the second copy is predictable. In layer 0 a "
    "**previous-token** head (the sub-diagonal) forms, in layer 1 an **induction** head (on the probe `[r, r]`, "
    "the stripe half a sequence back) — and the loss, flat at first, drops suddenly.",
}


def _shown(value) -> str:
    """A value as the link spells it."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _framework_name(fw: str) -> str:
    """The radio's label, which is also how the link spells the choice."""
    return "Both" if fw == BOTH else label(fw)


def _apply(config: training.TrainConfig) -> None:
    for name in FIELDS:
        st.session_state[f"lab_{name}"] = getattr(config, name)


def _first_visit() -> dict[str, str]:
    """Once per session. The widgets' defaults are the reverse preset and the link holds what
    differs (`bind="query-params"`); a link that names only a task opens with that task's preset.
    Returns the link's training values, to name those the widgets refused."""
    if "lab.visited" in st.session_state:
        return {}
    st.session_state["lab.visited"] = True
    link = {k: st.query_params[k] for k in st.query_params if k.startswith("lab_")}
    if set(link) - {"lab_framework"} == {"lab_task"} and link["lab_task"] in training.PRESETS:
        preset = training.PRESETS[link["lab_task"]]
        differ = {
            f"lab_{n}": _shown(getattr(preset, n))
            for n in FIELDS
            if getattr(preset, n) != getattr(DEFAULT, n)
        }
        # Written before the widgets bind, so they start from it and the link is complete.
        # Only the lab's own keys: the sidebar's bound keys may not be rewritten by a page.
        st.query_params.update(differ)
        _apply(preset)
        link |= differ
    return link


def _refused(link: dict[str, str]) -> list[str]:
    """The link's values the widgets did not take (out of range, not an option)."""
    out = []
    for key, raw in link.items():
        value = st.session_state.get(key)
        same = (_framework_name(value) if key == "lab_framework" else _shown(value)) == raw
        if isinstance(value, float) and not same:
            try:
                same = float(raw) == value
            except ValueError:
                same = False
        if not same:
            out.append(f"{key.removeprefix('lab_')}={raw}")
    return out


def _on_task() -> None:
    _apply(training.PRESETS[st.session_state["lab_task"]])


def sidebar() -> tuple[training.TrainConfig | None, list[str]]:
    """The training controls, each bound to the link (a change replaces the URL, no history entry)."""
    available = controls.installed_frameworks()
    choices = available + ([BOTH] if len(available) > 1 else [])
    bound = {"bind": "query-params"}
    with st.sidebar:
        st.selectbox(
            "Task",
            training.TASKS,
            index=training.TASKS.index(DEFAULT.task),
            key="lab_task",
            on_change=_on_task,
            **bound,
        )
        st.caption("Choosing a task loads settings that reach its target (docs/training.md).")
        framework = st.radio(
            "Framework",
            choices,
            format_func=_framework_name,
            key="lab_framework",
            help="Both: PyTorch and TensorFlow side by side, from the same initial weights and batches.",
            **bound,
        )
        c1, c2 = st.columns(2)
        for i, (name, text) in enumerate(
            [("seq_len", "Sequence length"), ("vocab", "Vocabulary"), ("n_layers", "Layers"), ("n_heads", "Heads"),
             ("d_model", "d_model"), ("batch", "Batch"), ("steps", "Steps"), ("snapshot_every", "Snapshot every"),
             ("seed", "Training seed")]
        ):  # fmt: skip
            lo, hi = training.LIMITS[name]
            column = c1 if i % 2 == 0 else c2
            column.number_input(
                text, lo, hi, value=getattr(DEFAULT, name), step=1, key=f"lab_{name}", **bound
            )
        st.number_input(
            "Learning rate", min_value=1e-5, max_value=training.LR_MAX, value=DEFAULT.lr, format="%.4g", step=0.001,
            key="lab_lr", **bound,
        )  # fmt: skip
        c1, c2 = st.columns(2)
        for column, name, text, options in (
            (c1, "optimizer", "Optimizer", training.OPTIMIZERS),
            (c2, "dtype", "dtype", training.DTYPES),
        ):
            index = options.index(getattr(DEFAULT, name))
            column.selectbox(text, options, index=index, key=f"lab_{name}", **bound)
        st.toggle("MLP after attention", value=DEFAULT.mlp, key="lab_mlp", **bound)
        st.toggle("Causal mask", value=DEFAULT.causal, key="lab_causal", **bound)
        st.caption(
            "The configuration is in the page's link; the trained weights are not (they live in this "
            "browser session only — download the checkpoint to keep them)."
        )
    values = {name: st.session_state[f"lab_{name}"] for name in FIELDS}
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
                head_grid(attn[layer], tokens, tokens, title=""),
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


@st.fragment(run_every=1.5)  # each redraw costs the training thread time (one Python lock)
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
    """History CSV, snapshots .npz and the checkpoint, each made when its button is clicked."""
    cols = st.columns(3)
    for fw, run in runs.items():
        name = f"attnviz-{run.config.task}-{fw}"
        files = [
            ("History CSV", run.history_csv, f"{name}-history.csv", "text/csv"),
            ("Snapshots .npz", run.snapshots_npz, f"{name}-snapshots.npz", "application/octet-stream"),
            ("Checkpoint .zip", lambda run=run: checkpoint_zip(run), f"{name}.zip", "application/zip"),
        ]
        for col, (text, make, file, mime) in zip(cols, files, strict=True):
            col.download_button(f"{text} ({label(fw)})", make, file, mime, key=f"lab.{file}")


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


def _share(run: training.TrainingRun) -> None:
    st.session_state[LINK] = training.share(run)


def pretrained_link(runs: dict) -> None:
    """Save a run where the Pretrained page finds it (when the operator lists that folder) and link there."""
    shared = str(training.save.SHARED_DIR)
    if shared not in os.environ.get(pretrained.ENV_DIRS, "").split(os.pathsep):
        st.caption(
            f"To explore a trained model on the Pretrained page, the server's operator adds `{shared}` to "
            f"`{pretrained.ENV_DIRS}` (docs/training.md). Anywhere: unzip the checkpoint and open it with "
            "`attnviz.pretrained.load(folder)`."
        )
        return
    fw, run = next(iter(runs.items()))
    st.button(
        f"Save the {label(fw)} run for the Pretrained page", key="lab.share", on_click=_share, args=(run,)
    )
    run_id = st.session_state.get(LINK)
    if run_id in pretrained.choices():
        text = " ".join(str(t) for t in run.probe[0])
        try:
            st.page_link(
                "pages/pretrained.py",
                label=f"Open {run_id} on the Pretrained page",
                icon=":material/psychology:",
                query_params={"pre.checkpoint": run_id, "pre.text": text},
            )
        except st.errors.StreamlitAPIException:  # this page runs outside app.py's navigation
            st.caption(f"Saved as `{run_id}`: pick it on the Pretrained page.")
        st.caption(
            "Saved on this server (every visitor can pick it there) until the server's temp folder is cleared."
        )


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


link = _first_visit()
config, frameworks = sidebar()
if link:
    st.session_state["lab.refused"] = _refused(link)
if st.session_state.get("lab.refused"):
    st.warning(
        "Left out of the link (values not allowed here): " + ", ".join(st.session_state["lab.refused"])
    )
task = st.session_state["lab_task"]
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
