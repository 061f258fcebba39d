"""The explorer, step-by-step and comparison pages tell the truth and can be read (issue 9).

State is set through the URL (`open_page(page, query)`), as a shared link would.
"""

import re

import numpy as np
import pytest

from attnviz import exec as ex
from attnviz import masks, settings
from attnviz.app.frame import door
from attnviz.app.sidebar import runs
from attnviz.plots.colorbar import named_bar
from attnviz.plots.labels import duration
from tests.app.conftest import array, assert_clean, figures, heatmaps, open_page, plain

SENTENCE_28 = " ".join(f"w{i}" for i in range(28))


def main_text(at) -> str:
    """Every text of the page's main area a reader sees (not the sidebar)."""
    parts = []
    for kind in (
        "title",
        "header",
        "subheader",
        "markdown",
        "caption",
        "info",
        "success",
        "error",
        "warning",
    ):
        parts += [plain(e.value) for e in getattr(at.main, kind)]
    for kind in ("metric",):
        parts += [f"{e.label} {e.value}" for e in getattr(at.main, kind)]
    for kind in ("selectbox", "radio", "segmented_control"):
        for w in at.main.get(kind):
            parts += [w.label, *map(str, w.options)]
    return "\n".join(parts)


def figure_text(at) -> str:
    """Titles, trace names and axis titles of every figure."""
    texts = []
    for fig in figures(at):
        layout = fig["layout"]
        texts.append(str(layout.get("title", {}).get("text", "")))
        texts += [str(a.get("text", "")) for a in layout.get("annotations", [])]
        texts += [str(t.get("name", "")) for t in fig["data"]]
    return "\n".join(texts)


def tick_labels(axis: dict) -> list[str]:
    return [t.replace("\u200b", "") for t in axis.get("ticktext", [])]


def axes(fig: dict, letter: str) -> list[dict]:
    return [v for k, v in fig["layout"].items() if re.fullmatch(f"{letter}axis\\d*", k)]


# -- 1: steady-state times ------------------------------------------------------------


def _submitted(monkeypatch) -> list[str]:
    """The names of the tasks this process sends to a worker from now on (`attnviz.exec.submit`)."""
    names, real = [], ex.submit

    def submit(task, *args, **kwargs):
        names.append(task.__name__)
        return real(task, *args, **kwargs)

    monkeypatch.setattr(ex, "submit", submit)
    return names


def test_explorer_forward_pass_is_the_steady_state_median(monkeypatch):
    submitted = _submitted(monkeypatch)
    query = {"n_heads": "2", "seed": "90210"}  # a configuration no other test caches
    at = open_page("explorer", query)
    cfg = {**settings.DEFAULTS, **settings.from_query(query)[0]}
    hit, timing = door.cached(runs.TIMING_CACHE, *runs.run_key(cfg))
    assert hit and timing.repeats == 7, "the worker's steady-state timing, kept in the server's cache"
    metric = next(m for m in at.metric if m.label.startswith("Forward pass"))
    assert metric.value == duration(timing.median_s), (
        "the median of warm calls, not the captured run's wall time"
    )
    assert submitted.count("explorer_run_timed") == 1, "the run and its timing: one task (issue 42)"
    text = main_text(at)
    assert "median of 7 warm calls" in text and "start-up" in text
    at.run()  # a rerun of the same configuration goes to no worker
    assert submitted.count("explorer_run_timed") == 1 and "steady_timing" not in submitted


def test_compare_page_shows_each_frameworks_steady_state_median(monkeypatch):
    submitted = _submitted(monkeypatch)
    query = {"seed": "90211"}  # a configuration no other test caches
    at = open_page("compare", query)
    cfg = {**settings.DEFAULTS, **settings.from_query(query)[0]}
    hit, comparison = door.cached(runs.COMPARISON_CACHE, settings.canonical(cfg), cfg["device"])
    assert hit and submitted.count("comparison") == 1
    assert comparison.torch.steps == comparison.tensorflow.steps == [], "reduced to what the page draws"
    shown = {m.label: m.value for m in at.metric}
    assert shown["PyTorch forward"] == duration(comparison.median_s["torch"])
    assert shown["TensorFlow forward"] == duration(comparison.median_s["tensorflow"])
    text = main_text(at)
    assert "steady state" in text and "median of warm calls" in text and "start-up is not included" in text


# -- 2: the verdict covers the compared steps only --------------------------------------


def test_compare_under_dropout_excludes_steps_after_dropout():
    at = open_page("compare", {"dropout": "0.3", "training": "true"})
    verdict = plain(at.success[0].value) if at.success else plain(at.error[0].value)
    assert "every compared step" in verdict or "Disagree" in verdict
    assert "not compared" in verdict and "own dropout mask" in verdict
    rel = float(re.search(r"largest is ([\d.e+-]+) at", verdict).group(1))
    assert rel <= 1e-5, "the largest error quoted is among the compared steps"
    rows = at.dataframe[0].value.set_index("step")["within tolerance"]
    for step in ("dropout", "context", "merged", "output_proj"):
        assert rows[step] == "not compared (after dropout)"
    assert (rows[["q_proj", "scores", "softmax"]] == "yes").all()


# -- 5: before / after dropout -----------------------------------------------------------


def test_explorer_shows_weights_after_dropout_on_request():
    p = 0.5
    at = open_page("explorer", {"dropout": str(p), "training": "true"})
    before = [array(t["z"]) for t in heatmaps(figures(at)[0])]
    assert at.radio(key="explorer.dropout").value == "before dropout"
    assert all(np.allclose(z.sum(1), 1, atol=1e-5) for z in before)
    at.radio(key="explorer.dropout").set_value("after dropout").run()
    assert_clean(at)
    after = [array(t["z"]) for t in heatmaps(figures(at)[0])]
    for b, a in zip(before, after, strict=True):
        kept = a != 0
        np.testing.assert_allclose(a[kept], b[kept] / (1 - p), rtol=1e-5)  # kept weights scaled by 1/(1-p)
    assert any(not np.allclose(a.sum(1), 1) for a in after), "dropout changed the picture"
    assert "After dropout" in main_text(at)


def test_dropout_without_training_says_nothing_is_dropped():
    for page in ("explorer", "steps"):
        at = open_page(page, {"dropout": "0.5"})
        assert "training mode is off: no dropout is applied" in main_text(at)


def test_steps_page_names_both_sides_of_dropout():
    at = open_page("steps", {"dropout": "0.5", "training": "true"})
    options = at.segmented_control(key="steps.current").options
    assert "softmax" in options and "dropout" in options
    assert "before dropout" in main_text(at)


# -- 6: every token labelled; one head enlarged ------------------------------------------


@pytest.mark.parametrize(
    ("query", "n"),
    [({"input": "sentence", "sentence": SENTENCE_28}, 28), ({"len_q": "64", "mask": "causal"}, 64)],
    ids=["28-word sentence", "64 positions"],
)
def test_explorer_and_steps_label_every_token(query, n):
    at = open_page("explorer", query)
    grid = figures(at)[0]
    tokens = [t.replace("\u200b", "") for t in heatmaps(grid)[0]["y"]]
    assert len(tokens) == n
    for axis in axes(grid, "y"):
        assert tick_labels(axis) == tokens
    for axis in axes(grid, "x"):  # keys: as many as the drawn width holds (tests/browser counts them)
        assert axis.get("tickmode") == "auto" and "tickvals" not in axis
    at = open_page("steps", {**query, "mask": "causal"})
    at.segmented_control(key="steps.current").set_value("softmax").run()
    fig = figures(at)[0]
    assert tick_labels(fig["layout"]["yaxis"]) == tokens and fig["layout"]["xaxis"]["tickmode"] == "auto"
    assert [t.replace("\u200b", "") for t in heatmaps(fig)[0]["x"]] == tokens


def test_one_head_enlarged_with_its_values():
    at = open_page("explorer", {"mask": "causal"})
    at.selectbox(key="explorer.enlarge").set_value("head 2").run()
    assert_clean(at)
    grid, big = figures(at)[:2]
    assert big["layout"]["title"]["text"] == "head 2"
    z = array(big["data"][0]["z"])
    np.testing.assert_allclose(np.nan_to_num(z), array(heatmaps(grid)[2]["z"]))
    assert big["data"][0]["texttemplate"] == "%{z:.2f}", "8 × 8: every cell shows its value"


def test_values_toggle_up_to_12_positions():
    at = open_page("explorer", {"len_q": "12"})
    at.toggle(key="explorer.values").set_value(True).run()
    assert all(t.get("texttemplate") == "%{z:.2f}" for t in heatmaps(figures(at)[0]))
    at = open_page("explorer", {"len_q": "13"})
    assert not [t for t in at.toggle if t.key == "explorer.values"]


# -- 7: one look for blocked; a colour scale row 0 cannot wash out --------------------------


def test_explorer_marks_blocked_cells_like_step_by_step():
    at = open_page("explorer", {"mask": "causal"})
    grid = figures(at)[0]
    fills = [s for s in grid["layout"]["shapes"] if s.get("fillcolor") == "#9e9e9e"]
    assert len(fills) == 4, "one grey overlay per head"
    assert any("✕" in c.value and "blocked" in c.value for c in at.caption)
    top = grid["layout"]["coloraxis"]["cmax"]
    assert top < 1, "row 0 (one allowed key, weight 1) does not set the top of the scale"
    z = np.stack([array(t["z"]) for t in heatmaps(grid)])
    assert top == pytest.approx(z[:, 1:].max(), rel=1e-6)
    assert "two or more allowed keys" in main_text(at)


# -- 8: mask conventions --------------------------------------------------------------------


def test_mask_conventions_are_titled_with_a_two_colour_legend():
    at = open_page("steps", {"mask": "causal"})
    charts = [f for f in figures(at) if f["data"][0].get("showscale") is False]
    assert [f["layout"]["title"]["text"] for f in charts] == [c["title"] for c in masks.CONVENTIONS.values()]
    for fig, info in zip(charts, masks.CONVENTIONS.values(), strict=True):
        assert sorted(t["name"].split(" = ")[1] for t in fig["data"][1:]) == ["blocked", "may attend"]
        assert info["meaning"] in [t["name"] for t in fig["data"][1:]]
    assert len({f["layout"]["height"] for f in charts}) == 1, "panels of one height line up"
    codes = [c for c in at.code if c.value in [i["code"] for i in masks.CONVENTIONS.values()]]
    assert len(codes) == 4 and all(c.proto.wrap_lines for c in codes), "code wraps instead of being cut off"


# -- 9, 10: no truncated text, no project-internal names --------------------------------------


@pytest.mark.parametrize("page", ["explorer", "steps", "compare"])
def test_no_label_speaks_of_the_projects_seeds_or_is_too_long(page):
    at = open_page(page, {"mask": "causal", "dropout": "0.2", "training": "true"})
    text = main_text(at) + "\n" + figure_text(at)
    assert not re.search(r"seeds? ?0\d\d", text), re.search(r".{40}seeds? ?0\d\d.{20}", text)
    assert all(len(m.value) <= 12 for m in at.metric), [m.value for m in at.metric]
    for fig in figures(at):
        assert len(str(fig["layout"].get("title", {}).get("text", ""))) <= 40


# -- 17: random weights say so --------------------------------------------------------------


def test_explorer_says_random_weights_have_no_pattern_and_links_to_pretrained():
    at = open_page("explorer")
    assert "Random weights show no learned pattern" in main_text(at)
    links = at.get("page_link")
    assert any(link.proto.page == "pretrained" for link in links)


# -- a link keeps the page's own view ------------------------------------------------------


def test_links_restore_the_pages_own_controls():
    at = open_page("explorer", {"mask": "causal", "explorer.enlarge": "head 2", "explorer.cols": "1"})
    grid, big = figures(at)[:2]
    assert grid["layout"]["meta"]["columns"] == 1 and big["layout"]["title"]["text"] == "head 2"
    at = open_page("steps", {"steps.current": "softmax", "steps.head": "2"})
    assert figures(at)[0]["layout"]["title"]["text"] == "softmax — head 2"
    at = open_page("steps", {"steps.head": "9"})  # more heads than there are: the first head, no error
    assert at.number_input(key="steps.head").value == 0


# -- issue 21 §1: compare colours against the tolerance; what its times include --------------


def test_compare_colours_differences_relative_to_the_tolerance():
    """Agreement (~1e-8 relative) must look like agreement: the colour scale is the tolerance,
    and each cell is the verdict's relative error, so the largest is the softmax row's."""
    at = open_page("compare", {"seed": "90212"})
    rows = at.dataframe[0].value.set_index("step")
    fig = next(f for f in figures(at) if "tolerance" in (named_bar(f) or ""))
    assert fig["layout"]["coloraxis"]["cmin"] == 0 and fig["layout"]["coloraxis"]["cmax"] == 1.0
    z = np.stack([array(t["z"]) for t in heatmaps(fig)])
    assert z.max() == pytest.approx(float(rows.loc["softmax", "relative"]) / 1e-5, rel=1e-2)
    assert z.max() < 0.1, "every cell far inside the tolerance: drawn nearly white"
    assert f"{z.max():.2g} of the tolerance" in main_text(at)


def test_compare_says_what_its_forward_times_include_and_links_timing():
    at = open_page("compare")
    text = main_text(at)
    assert "one operation after another" in text and "dispatch cost per operation" in text
    assert "timing" in {link.proto.page for link in at.get("page_link")}


# -- issue 21 §1: Timing's threads match, are recorded, and the sweep says what it costs -------


def run_tiny_sweep(at):
    """Two implementations (one per framework) at length 16: the real sweep, in seconds."""
    at.multiselect(key="timing.impls").set_value(["attnviz-torch", "attnviz-tf-function"])
    at.pills(key="timing.lengths").set_value([16])
    at.selectbox(key="timing.heads").set_value(2)
    at.selectbox(key="timing.d_model").set_value(64)
    at.button[0].click().run()
    assert_clean(at)
    return at.session_state["timing.result"]


def test_timing_runs_both_frameworks_with_one_thread_count_and_says_so():
    """TensorFlow first runs in this process (the explorer), fixing its pools; a sweep then runs
    PyTorch with the same count, records it per row, and the page says it."""
    open_page("explorer", {"framework": "tensorflow", "seed": "90213"})
    at = open_page("timing")
    result = run_tiny_sweep(at)
    meta, rows = result["meta"], result["rows"]
    assert meta["threads_match"] and len(set(meta["threads"].values())) == 1
    n = meta["threads"]["torch"]
    assert {r["threads"] for r in rows} == {n}, "every row ran with the count the page states"
    text = main_text(at)
    assert f"{n} thread{'s' if n != 1 else ''} in each framework" in text
    assert f"This sweep took {meta['duration_s']:.1f} s" in text
    assert meta["waited_s"] >= meta["duration_s"]  # the visitor's wait: the sweep and its worker's start
    if meta["waited_s"] - meta["duration_s"] >= 1:
        assert f"From Run benchmark to these results: {meta['waited_s']:.1f} s" in text
    assert len(figures(at)) == 4


def test_the_sweep_says_the_wait_when_the_worker_start_made_it_longer():
    """A teacher measured 15.8 s from the click while the page said the sweep took 2.5 s: the page
    says both when they differ by a second or more, and only the sweep's time otherwise."""
    from attnviz.app.timing import sweep

    long = sweep.duration_sentence({"duration_s": 2.5, "waited_s": 15.8}, 10)
    assert long.startswith("This sweep took 2.5 s: 10 measurements")
    assert "From Run benchmark to these results: 15.8 s" in long and "worker starting" in long
    for meta in ({"duration_s": 2.5, "waited_s": 3.2}, {"duration_s": 2.5}):  # close, or an older result
        assert "From Run benchmark" not in sweep.duration_sentence(meta, 10)
    assert sweep.duration_sentence({}, 4) == "Stopped after 4 measurements."


def test_timing_promise_is_the_measured_default_sweep():
    """The times the page promises before a run are those docs/timing_sweep.md measured."""
    from pathlib import Path

    from attnviz.app.timing import sweep

    doc = (Path(__file__).parents[2] / "docs" / "timing_sweep.md").read_text()
    rows = [  # the page in Chromium: what a visitor waits
        (float(t), float(load))
        for t, load in re.findall(r"\| page in Chromium \| ([\d.]+) s \| ([\d.]+) \|", doc)
    ]
    times = [t for t, _ in rows]
    assert (round(min(times)), round(max(times))) == sweep.DEFAULT_SWEEP_S
    assert round(sum(load for _, load in rows) / len(rows)) == sweep.DEFAULT_SWEEP_LOAD
    at = open_page("timing")
    fast, slow = sweep.DEFAULT_SWEEP_S
    took = f"took {fast} s" if fast == slow else f"took {fast}–{slow} s"
    assert took in plain(at.info[0].value) and f"load average of {sweep.DEFAULT_SWEEP_LOAD} " in plain(
        at.info[0].value
    )
