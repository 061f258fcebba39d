"""The Training lab page under AppTest: a tiny run to completion, the timeline, Stop, the URL, refusals."""

import time

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attnviz import training
from tests.app.conftest import APP, array, assert_clean, figures, heatmaps, open_page, plain

pytest.importorskip("torch")
TINY = {"lab_steps": "40", "lab_snapshot_every": "10", "lab_d_model": "16", "lab_framework": "PyTorch"}


def open_lab(query: dict) -> AppTest:
    """The Training lab under app.py (pages run only under its navigation), opened with `query`."""
    return open_page("training", query)


def wait(at: AppTest, timeout: float = 120) -> None:
    job = at.session_state["lab.job"]
    deadline = time.monotonic() + timeout
    while job.running and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not job.running
    at.run()
    assert_clean(at)


def layer_heatmap(at: AppTest) -> np.ndarray:
    """The first heatmap figure's head-0 values (layer 0)."""
    grid = next(f for f in figures(at) if heatmaps(f))
    return array(heatmaps(grid)[0]["z"])


def test_a_tiny_run_trains_to_completion_and_the_timeline_scrubs_the_heatmaps():
    at = open_lab(TINY)
    assert "Press **Start**" in at.info[0].value
    at.button(key="lab.start").click().run()
    assert_clean(at)
    wait(at)
    run = at.session_state["lab.job"].runs["torch"]
    assert run.finished and run.steps_done == 40 and not run.stopped
    slider = at.select_slider(key="lab.timeline")
    assert list(slider.options) == ["0", "10", "20", "30", "40"] and slider.value == 40
    end = layer_heatmap(at)
    np.testing.assert_allclose(end, run.snapshots[-1][1][0, 0], atol=1e-6)
    slider.set_value(0).run()
    assert_clean(at)
    start = layer_heatmap(at)
    np.testing.assert_allclose(start, run.snapshots[0][1][0, 0], atol=1e-6)
    assert np.abs(start - end).max() > 0.05  # the heatmap follows the timeline
    curves = next(f for f in figures(at) if any(t.get("name", "").endswith("loss") for t in f["data"]))
    assert {s["x0"] for s in curves["layout"]["shapes"]} == {0}  # the marker sits at the chosen step
    labels = [b.label for b in at.get("download_button")]
    assert {"History CSV (PyTorch)", "Snapshots .npz (PyTorch)", "Checkpoint .zip (PyTorch)"} <= set(labels)


def test_stop_keeps_what_was_trained():
    at = open_lab({**TINY, "lab_steps": "100000", "lab_snapshot_every": "250"})
    at.button(key="lab.start").click().run()
    job = at.session_state["lab.job"]
    deadline = time.monotonic() + 60
    while job.runs["torch"].steps_done < 5 and time.monotonic() < deadline:
        time.sleep(0.1)
    at.button(key="lab.stop").click().run()
    assert_clean(at)
    assert not job.running
    run = job.runs["torch"]
    assert run.stopped and 5 <= run.steps_done < 100_000 and run.params is not None
    assert at.select_slider(key="lab.timeline").value == run.steps_done  # the last snapshot is the stop
    assert "stopped" in at.get("progress")[0].proto.text


def test_the_configuration_lives_in_the_url():
    at = open_lab({"lab_task": "induction", "lab_n_layers": "2", "lab_seq_len": "99", "lab_causal": "maybe"})
    assert at.selectbox(key="lab_task").value == "induction"
    assert at.number_input(key="lab_n_layers").value == 2
    assert at.number_input(key="lab_seq_len").value == 8  # 99 is refused: the default stays
    warning = at.warning[0].value
    assert "seq_len=99" in warning and "causal=maybe" in warning
    assert "TrainConfig.causal" in plain(at.sidebar.error[0].value)  # induction needs the causal mask


def test_a_link_naming_only_a_task_opens_its_preset_and_becomes_complete():
    at = open_lab({"lab_task": "induction"})
    preset = training.PRESETS["induction"]
    assert at.number_input(key="lab_seq_len").value == preset.seq_len and at.toggle(key="lab_causal").value
    assert at.query_params["lab_seq_len"] == str(preset.seq_len) and at.query_params["lab_causal"] == "true"
    assert not at.sidebar.error and not at.warning
    at.selectbox(key="lab_task").set_value("sort").run()  # a new task loads its preset, into the link too
    assert at.number_input(key="lab_steps").value == training.PRESETS["sort"].steps
    assert at.query_params["lab_steps"] == str(training.PRESETS["sort"].steps)
    assert not at.toggle(key="lab_causal").value


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ({"lab_n_heads": "3", "lab_d_model": "32"}, "TrainConfig.n_heads"),
        ({"lab_steps": "100000", "lab_snapshot_every": "1"}, "snapshot_every"),
    ],
)
def test_a_config_that_cannot_run_is_refused_before_start(query, named):
    at = open_lab(query)
    assert named in plain(at.sidebar.error[0].value)
    assert at.button(key="lab.start").disabled


def test_both_frameworks_train_side_by_side_from_the_same_start():
    pytest.importorskip("tensorflow")
    at = open_lab({**TINY, "lab_framework": "Both", "lab_dtype": "float64"})
    at.button(key="lab.start").click().run()
    wait(at)
    assert not at.warning  # "Both" in the link is a value the page takes
    runs = at.session_state["lab.job"].runs
    assert set(runs) == {"torch", "tensorflow"}
    for name, value in runs["torch"].params.items():
        np.testing.assert_allclose(runs["tensorflow"].params[name], value, rtol=1e-6, atol=1e-9)
    curves = next(f for f in figures(at) if any(t.get("name", "").endswith("loss") for t in f["data"]))
    assert {t["name"] for t in curves["data"]} >= {"PyTorch: loss", "TensorFlow: loss"}
    grids = [f for f in figures(at) if heatmaps(f)]
    assert len(grids) == 2  # one layer each, both frameworks
    np.testing.assert_allclose(
        array(heatmaps(grids[0])[0]["z"]), array(heatmaps(grids[1])[0]["z"]), atol=1e-6
    )


def test_two_sessions_training_at_once_each_see_their_own_run():
    a = open_lab({**TINY, "lab_steps": "30", "lab_seed": "1"})
    b = open_lab({**TINY, "lab_steps": "50", "lab_seed": "2"})
    a.button(key="lab.start").click().run()
    b.button(key="lab.start").click().run()
    wait(a)
    wait(b)
    run_a, run_b = a.session_state["lab.job"].runs["torch"], b.session_state["lab.job"].runs["torch"]
    assert run_a is not run_b
    assert (run_a.steps_done, run_a.config.seed) == (30, 1) and (run_b.steps_done, run_b.config.seed) == (
        50,
        2,
    )
    assert a.select_slider(key="lab.timeline").value == 30 and b.select_slider(key="lab.timeline").value == 50


def test_a_saved_run_opens_on_the_pretrained_page(monkeypatch, tmp_path):
    monkeypatch.setattr(training.save, "SHARED_DIR", tmp_path)
    monkeypatch.setenv("ATTNVIZ_CHECKPOINTS", str(tmp_path))
    at = open_lab(TINY)
    at.button(key="lab.start").click().run()
    wait(at)
    at.button(key="lab.share").click().run()
    assert_clean(at)
    run_id = at.session_state["lab.shared"]
    assert (tmp_path / run_id / "model.safetensors").exists()
    run = at.session_state["lab.job"].runs["torch"]
    text = " ".join(str(t) for t in run.probe[0])
    app = AppTest.from_file(APP, default_timeout=180)
    app.query_params["pre.checkpoint"] = run_id
    app.query_params["pre.text"] = text
    app.run()
    app.switch_page("pages/pretrained.py").run()
    assert_clean(app)
    shown = next(f for f in figures(app) if heatmaps(f))
    np.testing.assert_allclose(array(heatmaps(shown)[0]["z"]), run.snapshots[-1][1][0, 0], atol=1e-5)


def test_without_the_operators_folder_the_page_says_how_to_enable_the_pretrained_link(monkeypatch):
    monkeypatch.delenv("ATTNVIZ_CHECKPOINTS", raising=False)
    at = open_lab(TINY)
    at.button(key="lab.start").click().run()
    wait(at)
    assert "lab.share" not in [b.key for b in at.button]
    assert any("ATTNVIZ_CHECKPOINTS" in c.value for c in at.caption)
