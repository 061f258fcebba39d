"""The Training lab page under AppTest: a tiny run to completion in a worker process, the timeline,
Stop, the URL, refusals, the first screen."""

import json
import os
import re
import signal
import threading
import time

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest
from streamlit.testing.v1.element_tree import Block, Column

from attnviz import exec as ex
from attnviz import training
from attnviz.app.training import state as lab
from tests.app.conftest import array, assert_clean, figures, heatmaps, open_page, plain
from tests.conftest import ATOL_FIGURE, RTOL_FIGURE

pytest.importorskip("torch")
TINY = {
    "training.steps": "40",
    "training.snapshot_every": "10",
    "training.d_model": "16",
    "training.framework": "PyTorch",
}


def open_lab(query: dict) -> AppTest:
    """The Training lab under app.py (pages run only under its navigation), opened with `query`."""
    return open_page("training", query)


@pytest.fixture
def workers(monkeypatch):
    """A local engine of this test's own with 3 workers, so 2 trainings may run at once (the
    default server's 2 workers allow 1); closed after the test."""
    engine = ex.LocalEngine(ex.Budget(workers=3, trainings=2))
    monkeypatch.setitem(ex._ENGINES, "local", engine)
    yield engine
    engine.close()


def wait(at: AppTest, timeout: float = 120) -> None:
    """Until the session's training task has ended (its handle's own wait, no fixed sleep); then rerun."""
    job = at.session_state["training.job"]
    deadline = time.monotonic() + timeout
    while job.running and time.monotonic() < deadline:
        job.handle.wait(1.0)
    assert not job.running
    at.run()
    assert_clean(at)


def long_run_past_step_5(monkeypatch):
    """A 100,000-step run started on the page, once its worker has reported 5 steps: (page, job)."""
    monkeypatch.setenv("ATTNVIZ_TRAIN_MAX_STEPS", "100000")
    at = open_lab({**TINY, "training.steps": "100000", "training.snapshot_every": "250"})
    at.button(key="training.start").click().run()
    job = at.session_state["training.job"]
    deadline = time.monotonic() + 60
    while ("torch" not in job.runs or job.runs["torch"].steps_done < 5) and time.monotonic() < deadline:
        job.handle.wait(1.0)
    return at, job


def layer_heatmap(at: AppTest) -> np.ndarray:
    """The first heatmap figure's head-0 values (layer 0)."""
    grid = next(f for f in figures(at) if heatmaps(f))
    return array(heatmaps(grid)[0]["z"])


def test_a_tiny_run_trains_to_completion_and_the_timeline_scrubs_the_heatmaps():
    at = open_lab(TINY)
    assert any("Press **Start**" in c.value for c in at.caption)
    at.button(key="training.start").click().run()
    assert_clean(at)
    wait(at)
    run = at.session_state["training.job"].runs["torch"]
    assert run.finished and run.steps_done == 40 and not run.stopped
    slider = at.select_slider(key="training.timeline")
    assert list(slider.options) == ["0", "10", "20", "30", "40"] and slider.value == 40
    end = layer_heatmap(at)
    np.testing.assert_allclose(end, run.snapshots[-1][1][0, 0], atol=ATOL_FIGURE)
    slider.set_value(0).run()
    assert_clean(at)
    start = layer_heatmap(at)
    np.testing.assert_allclose(start, run.snapshots[0][1][0, 0], atol=ATOL_FIGURE)
    assert np.abs(start - end).max() > 0.05  # the heatmap follows the timeline
    curves = next(f for f in figures(at) if any(t.get("name", "").endswith("loss") for t in f["data"]))
    assert {s["x0"] for s in curves["layout"]["shapes"]} == {0}  # the marker sits at the chosen step
    labels = [b.label for b in at.get("download_button")]
    assert {"History CSV (PyTorch)", "Snapshots .npz (PyTorch)", "Checkpoint .zip (PyTorch)"} <= set(labels)


def test_stop_keeps_what_was_trained(monkeypatch):
    at, job = long_run_past_step_5(monkeypatch)
    at.button(key="training.stop").click().run()
    assert_clean(at)
    wait(at, 10)  # the worker's task sees the stop between two steps
    run = job.runs["torch"]
    assert run.stopped and 5 <= run.steps_done < 100_000 and run.params is not None
    assert at.select_slider(key="training.timeline").value == run.steps_done  # the last snapshot is the stop
    assert "stopped" in at.get("progress")[0].proto.text


def test_a_stop_its_worker_cannot_answer_still_reads_stopped(monkeypatch, workers):
    """A Stop while the worker cannot leave its step (here: frozen with SIGSTOP; in class, a loaded
    machine) ends the worker after the grace period: the page says "stopped", as the visitor asked,
    not "ended", and names the forced end."""
    at, job = long_run_past_step_5(monkeypatch)
    os.kill(job.handle._worker, signal.SIGSTOP)
    at.button(key="training.stop").click().run()
    wait(at, 60)
    assert isinstance(job.failure, ex.Stopped) and job.failure.forced
    progress = at.get("progress")[0].proto.text
    assert progress.startswith("PyTorch: stopped ·"), progress
    said = [e.value for e in [*at.error, *at.warning, *at.info]]
    assert any("did not stop in time" in text for text in said), said


def test_the_configuration_lives_in_the_url():
    at = open_lab(
        {
            "training.task": "induction",
            "training.n_layers": "2",
            "training.seq_len": "99",
            "training.causal": "maybe",
        }
    )
    assert at.selectbox(key="training.task").value == "induction"
    assert at.number_input(key="training.n_layers").value == 2
    assert at.number_input(key="training.seq_len").value == 8  # 99 is refused: the default stays
    warning = plain(" ".join(w.value for w in at.warning))  # numbers: the link reader's note (issue 26)
    assert "training.seq_len='99' ignored; allowed: 2 … 64" in warning and "causal=maybe" in warning
    assert "TrainConfig.causal" in plain(at.sidebar.error[0].value)  # induction needs the causal mask


def test_a_link_naming_only_a_task_opens_its_preset_and_becomes_complete():
    at = open_lab({"training.task": "induction"})
    preset = training.PRESETS["induction"]
    assert (
        at.number_input(key="training.seq_len").value == preset.seq_len
        and at.toggle(key="training.causal").value
    )
    assert (
        at.query_params["training.seq_len"] == str(preset.seq_len)
        and at.query_params["training.causal"] == "true"
    )
    assert not at.sidebar.error and not at.warning
    at.selectbox(key="training.task").set_value(
        "sort"
    ).run()  # a new task loads its preset, into the link too
    assert at.number_input(key="training.steps").value == training.PRESETS["sort"].steps
    assert at.query_params["training.steps"] == str(training.PRESETS["sort"].steps)
    assert not at.toggle(key="training.causal").value


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ({"training.n_heads": "3", "training.d_model": "32"}, "TrainConfig.n_heads"),
        ({"training.steps": "5000", "training.snapshot_every": "1"}, "snapshot_every"),
        ({"training.steps": "5001"}, "ATTNVIZ_TRAIN_MAX_STEPS"),
        (
            {
                "training.d_model": "256",
                "training.n_layers": "4",
                "training.batch": "1024",
                "training.seq_len": "64",
            },
            "a batch of at most",
        ),
    ],
)
def test_a_config_that_cannot_run_is_refused_before_start(query, named):
    at = open_lab(query)
    assert named in plain(at.sidebar.error[0].value)
    assert at.button(key="training.start").disabled


def test_both_frameworks_train_side_by_side_from_the_same_start():
    pytest.importorskip("tensorflow")
    at = open_lab({**TINY, "training.framework": "Both", "training.dtype": "float64"})
    at.button(key="training.start").click().run()
    wait(at)
    assert not at.warning  # "Both" in the link is a value the page takes
    runs = at.session_state["training.job"].runs
    assert set(runs) == {"torch", "tensorflow"}
    for name, value in runs["torch"].params.items():
        np.testing.assert_allclose(runs["tensorflow"].params[name], value, rtol=RTOL_FIGURE, atol=1e-9)
    curves = next(f for f in figures(at) if any(t.get("name", "").endswith("loss") for t in f["data"]))
    assert {t["name"] for t in curves["data"]} >= {"PyTorch: loss", "TensorFlow: loss"}
    grids = [f for f in figures(at) if heatmaps(f)]
    assert len(grids) == 2  # one layer each, both frameworks
    np.testing.assert_allclose(
        array(heatmaps(grids[0])[0]["z"]), array(heatmaps(grids[1])[0]["z"]), atol=ATOL_FIGURE
    )


def test_two_sessions_training_at_once_each_see_their_own_run(workers):
    a = open_lab({**TINY, "training.steps": "30", "training.seed": "1"})
    b = open_lab({**TINY, "training.steps": "50", "training.seed": "2"})
    a.button(key="training.start").click().run()
    b.button(key="training.start").click().run()
    wait(a)
    wait(b)
    run_a, run_b = (
        a.session_state["training.job"].runs["torch"],
        b.session_state["training.job"].runs["torch"],
    )
    assert run_a is not run_b
    assert (run_a.steps_done, run_a.config.seed) == (30, 1) and (run_b.steps_done, run_b.config.seed) == (
        50,
        2,
    )
    assert (
        a.select_slider(key="training.timeline").value == 30
        and b.select_slider(key="training.timeline").value == 50
    )


def test_a_run_is_saved_once_under_its_task_and_time_for_this_session_only(monkeypatch, tmp_path):
    monkeypatch.setenv(training.save.ENV_DIR, str(tmp_path))
    monkeypatch.setattr(lab, "session_id", lambda: "visitor-a")
    at = open_lab(TINY)
    at.button(key="training.start").click().run()
    wait(at)
    at.button(key="training.save.torch").click().run()
    assert_clean(at)
    name = at.session_state["training.saved"]
    assert re.fullmatch(r"reverse · PyTorch · \d\d:\d\d:\d\d", name), name
    assert "training.save.torch" not in [b.key for b in at.button]  # one save per run: the button is gone
    training.share(
        at.session_state["training.job"].runs["torch"], training.owner_of("visitor-a")
    )  # again: no copy
    saved = list(tmp_path.glob("*/*/model.safetensors"))
    assert len(saved) == 1
    assert list(training.session_checkpoints("visitor-a")) == [name]
    assert training.session_checkpoints("another session") == {}
    links = {e.proto.label.split(" ")[0]: e.proto.page for e in at.get("page_link") if name in e.proto.label}
    assert set(links) == {"Open", "Scan"}, links  # the Pretrained page and the Interpretability page
    assert "pretrained" in links["Open"] and "interpret" in links["Scan"], links


def test_an_old_lab_link_still_opens_its_configuration():
    at = open_lab({"lab_task": "induction", "lab_n_layers": "2", "lab_steps": "300"})
    assert at.selectbox(key="training.task").value == "induction"
    assert (
        at.number_input(key="training.n_layers").value == 2
        and at.number_input(key="training.steps").value == 300
    )
    assert "lab_task" not in at.query_params and at.query_params["training.task"] == "induction"
    assert not at.warning


def test_a_start_beyond_the_servers_runs_gets_the_limit_message(monkeypatch):
    """The default server (2 workers) trains one run at a time: a worker stays free for pages."""
    engine = ex.LocalEngine(ex.Budget(workers=2, trainings=1))
    monkeypatch.setitem(ex._ENGINES, "local", engine)
    monkeypatch.setenv("ATTNVIZ_TRAIN_MAX_STEPS", "100000")
    a = open_lab({**TINY, "training.steps": "100000", "training.snapshot_every": "250"})
    b = open_lab(TINY)
    a.button(key="training.start").click().run()
    try:
        b.button(key="training.start").click().run()
        assert_clean(b)
        assert "training.job" not in b.session_state
        assert "ATTNVIZ_TRAIN_MAX_RUNS" in plain(b.warning[0].value)
        a.session_state["training.job"].stop()
        wait(a, 10)
        b.button(key="training.start").click().run()  # the slot is free again
        wait(b)
        assert b.session_state["training.job"].runs["torch"].finished
    finally:
        engine.close()


def test_both_frameworks_are_drawn_side_by_side():
    pytest.importorskip("tensorflow")
    at = open_lab({**TINY, "training.framework": "Both"})
    at.button(key="training.start").click().run()
    wait(at)
    # Each row of columns: how many heatmap charts each of its columns holds.
    rows = [
        [
            sum(1 for f in col.get("plotly_chart") if heatmaps(json.loads(f.proto.spec)))
            for col in block.children.values()
        ]
        for block in at.main
        if isinstance(block, Block) and any(isinstance(c, Column) for c in block.children.values())
    ]
    assert [1, 1] in rows, rows  # PyTorch's layer beside TensorFlow's, no empty half
    assert not any(0 in r and 1 in r for r in rows), rows


INDUCTION = {  # the induction preset (24 tokens, 2 layers × 2 heads, causal), a few steps
    "training.task": "induction",
    "training.seq_len": "24",
    "training.vocab": "32",
    "training.n_layers": "2",
    "training.n_heads": "2",
    "training.d_model": "64",
    "training.causal": "true",
    "training.lr": "0.003",
    "training.steps": "20",
    "training.framework": "PyTorch",
}


def test_before_start_the_page_shows_the_tasks_example_and_the_models_shape():
    """Issue 33: the first screen says what Start will train, not just an info box."""
    at = open_lab(INDUCTION)
    assert not at.info
    shape = plain(" ".join(m.value for m in at.markdown))
    assert "2 layers × 2 heads" in shape and "d_model 64" in shape and "sequences of 24" in shape
    assert (
        "causal mask" in shape
        and f"{training.estimate(training.PRESETS['induction']).params:,} parameters" in shape
    )
    table = at.table[0].value
    assert list(table.index) == ["input", "target"] and len(table.columns) == 24
    x = np.array([int(t) for t in table.loc["input"]])
    targets = table.loc["target"]
    counted = [i for i, t in enumerate(targets) if t != "·"]
    assert counted, "the second copy's targets are shown"
    for i in counted:  # next-token targets inside the second copy: each can be read off the first copy
        assert int(targets.iloc[i]) == x[i + 1] and x[i + 1] in x[:i]


def test_induction_heatmaps_are_square_thinned_and_blocked_grey():
    """Issue 33: 24 × 24 maps with square cells, at most 12 labels per axis, the blocked cells grey ✕."""
    at = open_lab(INDUCTION)
    at.button(key="training.start").click().run()
    wait(at)
    grids = [f for f in figures(at) if heatmaps(f)]
    assert len(grids) == 2  # one per layer
    for grid in grids:
        layout = grid["layout"]
        for n in (
            "",
            "2",
        ):  # each head's panel: x scaled to its y (the row's shared query axis), one unit each
            assert layout[f"xaxis{n}"]["scaleanchor"] == f"y{n}" and layout[f"xaxis{n}"]["scaleratio"] == 1
            assert "scaleanchor" not in layout[f"yaxis{n}"]  # it did not hold on an axis matching another
        assert len(layout["xaxis"]["tickvals"]) <= 12 and len(layout["yaxis"]["tickvals"]) <= 12
        assert layout["meta"]["label_stride"] == 2
        grey = [s for s in layout["shapes"] if s.get("fillcolor") == "#9e9e9e"]
        assert len(grey) == 2  # one blocked region per head
        crosses = [s for s in layout["shapes"] if s.get("line", {}).get("color") == "#424242"]
        assert len(crosses) == 2 and crosses[0]["path"].count("M") == 2 * (
            24 * 23 // 2
        )  # ✕ in every blocked cell
        assert any(t.get("name") == "blocked (masked out)" for t in grid["data"])


def test_the_live_view_wakes_at_the_end_not_at_a_report():
    """`LabJob.wait_end` waits through the reports (a task reports after every snapshot) and returns as
    the task ends: the page draws the end at once, not at its next read a second later."""
    handle = ex.Handle("train", ex.Limits.from_env())
    job = lab.LabJob(handle, training.PRESETS["reverse"], ["torch"])
    handle._start(0)

    def feed():  # 20 reports 10 ms apart, then the end
        for step in range(20):
            handle._report(step, 20, None)
            time.sleep(0.01)
        handle._finish(value=None)

    assert not job.wait_end(0.05)  # reports alone do not end the wait
    threading.Thread(target=feed, daemon=True).start()
    began = time.monotonic()
    assert job.wait_end(30) and handle.done()
    assert time.monotonic() - began < 10  # woken by the end, not by the timeout


def progress(state: str, done: int, total: int | None, elapsed_s: float) -> ex.Progress:
    return ex.Progress(state, done, total, (), elapsed_s, None)


def test_the_live_figures_are_not_rebuilt_for_a_run_about_to_end(monkeypatch):
    """A live redraw sent just before the end only delays the final view (the browser draws it first):
    the figures are due once the task has trained `FIGURES_AFTER_S`, while its pace leaves more than
    `FIGURES_LAST_S` to go; otherwise the last ones built stay."""
    after, last = lab.FIGURES_AFTER_S, lab.FIGURES_LAST_S
    assert not lab.figures_due(progress("running", 10, 1000, after * 0.9))  # too early
    assert lab.figures_due(progress("running", 10, 1000, after * 1.1))  # 99 % to go at this pace
    assert not lab.figures_due(progress("running", 990, 1000, after * 1.1))  # 1 % to go: the end comes first
    pace = last / 100  # seconds per step, then 100 steps to go = `last` seconds
    assert not lab.figures_due(progress("running", 400, 500, 400 * pace))
    assert lab.figures_due(progress("running", 400, 502, 400 * pace))
    assert lab.figures_due(progress("running", 0, 1000, after * 2))  # trained long without a step: no pace
    assert not lab.figures_due(progress("done", 10, 1000, after * 2))
    monkeypatch.setattr(lab.st, "session_state", {})
    built = []
    run = training.TrainingRun(training.PRESETS["reverse"], "torch", None, scores=[{}])
    assert lab.live_figures({"torch": run}, lambda: built.append(1) or "first", due=False) is None
    assert lab.live_figures({"torch": run}, lambda: built.append(1) or "first", due=True) == "first"
    run.scores.append({})  # a new snapshot, but the run is about to end: the last ones stay
    assert lab.live_figures({"torch": run}, lambda: built.append(1) or "second", due=False) == "first"
    assert lab.live_figures({"torch": run}, lambda: built.append(1) or "second", due=True) == "second"
    assert len(built) == 2
