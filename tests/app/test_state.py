"""The app's state and limits: valid choices only, links, pages list, caches, sweeps, errors."""

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from attnviz import formats, heads, masks, settings
from attnviz.app import controls
from attnviz.app.frame import results
from attnviz.app.frame.pages import PAGES
from attnviz.app.sidebar import runs, tasks
from tests.app.conftest import (
    array,
    assert_clean,
    errors,
    figures,
    heatmaps,
    open_page,
    warnings,
)

ROOT = Path(__file__).parents[2]


# -- controls offer only what can run ----------------------------------------------------


@pytest.mark.parametrize("d_model", [30, 32, 31])
def test_heads_offers_exactly_the_divisors_and_each_draws(d_model):
    at = open_page("explorer", {"d_model": str(d_model)})
    offered = [int(o) for o in at.select_slider(key="n_heads").options]
    assert offered == [h for h in range(1, 17) if d_model % h == 0]
    for h in offered:
        if len(offered) > 1:  # a single choice is shown disabled
            at.select_slider(key="n_heads").set_value(h).run()
        assert_clean(at)
        assert not errors(at) and not errors(at, "sidebar") and not warnings(at)
        assert len(heatmaps(figures(at)[0])) == h


def test_heads_offers_every_count_when_d_k_and_d_v_are_set():
    at = open_page("explorer", {"d_model": "30", "d_k": "4", "d_v": "4"})
    assert [int(o) for o in at.select_slider(key="n_heads").options] == list(range(1, 17))
    at.select_slider(key="n_heads").set_value(7).run()
    assert_clean(at)
    assert len(heatmaps(figures(at)[0])) == 7


def test_a_link_with_an_invalid_head_count_gets_the_nearest_divisor_with_a_note():
    at = open_page("explorer", {"d_model": "30", "n_heads": "8"})
    assert at.session_state["n_heads"] == 6
    assert "Heads 8 → 6" in warnings(at, "sidebar")
    assert at.query_params["n_heads"] in ("6", ["6"]), "the link is rewritten to what is shown"
    assert len(heatmaps(figures(at)[0])) == 6


def test_choosing_padding_shortens_the_real_length_so_it_shows():
    at = open_page("explorer", {"len_q": "6"})
    at.selectbox(key="mask").set_value("padding").run()
    assert_clean(at)
    assert at.session_state["valid_kv_len"] == 5 < 6
    z = array(heatmaps(figures(at)[0])[0]["z"])
    assert (z[:, 5] == 0).all() and (z[:, :5] > 0).all()


def test_older_links_with_0_1_flags_still_open():
    at = open_page("compare", {"dropout": "0.3", "training": "1"})
    assert at.session_state["training"] is True and at.session_state["dropout"] == pytest.approx(0.3)
    assert at.query_params["training"] in ("true", ["true"])


def test_no_label_speaks_of_the_projects_seeds():
    kinds = ("checkbox", "radio", "slider", "select_slider", "number_input", "selectbox", "text_input")
    for name in ("home", "explorer", "timing"):
        at = open_page(name)
        texts = [w.label for kind in kinds for w in getattr(at, kind)]
        texts += [str(w.help or "") for kind in kinds for w in getattr(at, kind)]
        texts += [e.value for kind in ("caption", "markdown", "info", "subheader") for e in getattr(at, kind)]
        assert len(texts) > 20 and not [t for t in texts if "seed 0" in t.lower()], name
    assert "the Transformer's Add & Norm" in open_page("explorer").checkbox(key="residual_norm").label


def test_home_links_to_every_page_file():
    """Home's links against the page files on disk (not against the list Home builds them from):
    a page added without a row in attnviz.app.frame.pages, or a row Home leaves out, fails here."""
    at = open_page("home")
    linked = {link.proto.page for link in at.get("page_link")}
    on_disk = {path.stem for path in (ROOT / "pages").glob("*.py")} - {"home"}
    assert linked == on_disk
    routed = {p.name for p in PAGES}
    assert routed == on_disk | {"home"}, "app.py routes every page file"
    assert all((ROOT / p.path).is_file() for p in PAGES)


# -- interpretable heads --------------------------------------------------------------


def test_interpretable_heads_draw_the_patterns_they_name():
    at = open_page("explorer", {"weights": "interpretable", "len_q": "10"})
    assert_clean(at)
    panels = [array(p["z"]) for p in heatmaps(figures(at)[0])]
    assert len(panels) == 4 and heads.PATTERNS[0] == "previous token"
    previous, same, first = panels[0], panels[1], panels[2]
    assert all(previous[i, i - 1] >= 0.9 for i in range(1, 10))
    assert all(same[i, i] >= 0.9 for i in range(10))
    assert all(first[i, 0] >= 0.9 for i in range(10))


def test_a_spec_that_cannot_host_the_heads_is_explained_next_to_the_control():
    at = open_page("explorer", {"weights": "interpretable", "d_model": "16", "n_heads": "16"})
    assert_clean(at)
    assert "d_k: got 1; allowed: at least 2 for interpretable heads" in errors(at, "sidebar")
    assert not errors(at), "no full-page error"
    advanced = next(e for e in at.sidebar.expander if e.label == "Advanced")
    assert not advanced.error, "d_k is folded under Advanced: its error shows above the fold"


def test_timing_measures_what_run_computes(monkeypatch):
    """The worker's two tasks (`attnviz.app.sidebar.tasks`), called here with spies: the timing runs
    the recorded run's spec, inputs and parameters (interpretable heads included)."""
    seen = {}

    def spy(name, real):
        def call(spec, framework, device, **kwargs):
            seen[name] = kwargs
            return real(spec, framework, device, **kwargs)

        return call

    monkeypatch.setattr(tasks, "run_attention", spy("run", tasks.run_attention))
    monkeypatch.setattr(tasks, "time_attention", spy("time", tasks.time_attention))
    cfg = {**settings.DEFAULTS, "weights": "interpretable", "len_q": 6, "seed": 3}
    key = runs.run_key(cfg)
    result, timing = tasks.explorer_run(*key), tasks.steady_timing(*key)
    assert timing.median_s > 0 and result.weights.shape == (1, 4, 6, 6)
    run, timed = seen["run"], seen["time"]
    assert np.array_equal(run["x_q"], timed["x_q"]) and run["x_kv"] is timed["x_kv"] is None
    assert run["params"].keys() == timed["params"].keys()
    assert all(np.array_equal(run["params"][k], timed["params"][k]) for k in run["params"])


# -- custom masks in links -----------------------------------------------------------------


@pytest.mark.parametrize("kind", ["random", "causal", "window", "all blocked"])
def test_a_512_by_512_mask_round_trips_and_fits_a_link(kind):
    rng = np.random.default_rng(0)
    mask = {
        "random": rng.random((512, 512)) < 0.5,
        "causal": np.tril(np.ones((512, 512), bool)),
        "window": np.abs(np.subtract.outer(np.arange(512), np.arange(512))) <= 3,
        "all blocked": np.zeros((512, 512), bool),
    }[kind]
    code = masks.encode_mask(mask)
    assert len(code) <= 43_700 and set(code) <= set(
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_."
    )
    assert np.array_equal(masks.decode_mask(code, 512, 512), mask)
    if kind != "random":
        assert len(code) < 6_000, "structured masks stay short"


def test_small_masks_stay_readable_and_old_links_decode():
    mask = np.tril(np.ones((4, 4), bool))
    assert masks.encode_mask(mask) == "1000.1100.1110.1111"
    assert np.array_equal(masks.decode_mask("1000.1100.1110.1111", 4, 4), mask)
    assert masks.decode_mask("10.11", 3, 3).tolist() == [[1, 0, 1], [1, 1, 1], [1, 1, 1]]


def test_a_mask_that_cannot_fit_a_link_gets_a_clear_message(monkeypatch):
    monkeypatch.setattr(masks, "MAX_MASK_CODE", 1000)
    with pytest.raises(settings.SpecError, match="fits in 1,000 characters") as caught:
        masks.encode_mask(np.random.default_rng(0).random((100, 100)) < 0.5)
    assert caught.value.field == "custom_mask"


@pytest.mark.parametrize(
    "code", ["r1x1.1.zzzzzzzzzz", "r4x4.2.16", "p9999x9999.AAAA", "10x.1", "r4x4.1.0.16"]
)
def test_hostile_mask_codes_are_refused_without_allocating(code):
    start = time.perf_counter()
    assert masks.mask_code_problem(code) is not None
    assert time.perf_counter() - start < 0.5
    assert masks.decode_mask(code, 3, 3).tolist() == np.tril(np.ones((3, 3), bool)).tolist()


def test_a_large_custom_mask_link_opens():
    code = masks.encode_mask(np.abs(np.subtract.outer(np.arange(300), np.arange(300))) <= 2)
    at = open_page("explorer", {"mask": "custom", "len_q": "300", "custom_mask": code})
    assert_clean(at)
    assert at.session_state["custom_mask"] == code and figures(at)


# -- caches bounded by bytes ----------------------------------------------------------------


def test_cache_evicts_least_recently_used_by_bytes():
    store = results.ByteCache(budget=3 * 800_000)
    arrays = {k: np.zeros(100_000) for k in "abcd"}  # 800 kB each
    for k in "abc":
        assert store.put(k, arrays[k], ttl=60)
    store.get("a")
    store.put("d", arrays["d"], ttl=60)
    assert [k for k in "abcd" if store.get(k)[0]] == ["a", "c", "d"]
    assert store.stats()["bytes"] <= store.budget
    assert not store.put("huge", np.zeros(400_000), ttl=60), "an entry over the whole budget is not kept"


def test_cache_entries_expire():
    now = [0.0]
    store = results.ByteCache(budget=10**6, clock=lambda: now[0])
    store.put("k", np.zeros(10), ttl=0.05)
    assert store.get("k")[0]
    now[0] += 0.1
    assert not store.get("k")[0] and store.stats()["bytes"] == 0


def test_bounded_returns_a_copy_per_call():
    calls = []

    @results.bounded("test copies")
    def make(n: int):
        calls.append(n)
        return {"a": np.zeros(n)}

    first = make(3)
    first["a"][:] = 7
    assert make(3)["a"].tolist() == [0, 0, 0] and calls == [3]


def test_cache_budget_comes_from_the_environment():
    code = "from attnviz.app.frame import results; print(results.CACHE.budget, results.SWEEP_BYTES)"
    env = {
        "ATTNVIZ_CACHE_MB": "64",
        "ATTNVIZ_SWEEP_MB": "nan",
        "PATH": "",
    }
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env)
    assert out.stdout.split() == [str(64 * 2**20), str(1024 * 2**20)], out.stderr[-500:]


MEMORY_SCRIPT = """
import json, sys
from tests.app.conftest import open_page
from tests.browser.load import rss_bytes
import os
from attnviz.app.frame import results
at = open_page("explorer", {"len_q": "512", "n_heads": "16", "d_model": "16"})
base = rss_bytes(os.getpid())
peak, held = 0, []
for seed in range(1, 13):
    at.number_input(key="seed").set_value(seed).run()
    assert not at.exception, at.exception
    peak = max(peak, rss_bytes(os.getpid()))
    held.append(results.CACHE.stats()["bytes"])
print(json.dumps({"base": base, "peak": peak, "held": held, "budget": results.CACHE.budget}))
"""


@pytest.mark.timeout(900)
def test_many_large_configurations_keep_memory_under_the_cache_budget():
    """Issue 10 §3: 12 distinct len-512 × 16-head runs (≈ 67 MB each) would all stay cached without a bound."""
    env = {**__import__("os").environ, "ATTNVIZ_CACHE_MB": "200"}
    out = subprocess.run(
        [sys.executable, "-c", MEMORY_SCRIPT], capture_output=True, text=True, cwd=ROOT, env=env, timeout=900
    )
    assert out.returncode == 0, out.stderr[-3000:]
    figures_ = json.loads(out.stdout.strip().splitlines()[-1])
    assert max(figures_["held"]) <= figures_["budget"], figures_
    assert len(set(figures_["held"])) > 1, "results were cached (and evicted)"
    # The server's resident memory under the same load: tests/browser/test_server_memory.py.


# -- Timing: each sweep within budget (it runs in a worker: attnviz.app.timing.sweep) ----------


def _press_run(at, lengths=(16,)):
    at.multiselect(key="timing.impls").set_value(["attnviz-torch"])
    at.pills(key="timing.lengths").set_value(list(lengths))
    at.number_input(key="timing.repeats").set_value(3)
    at.button[0].click().run()
    assert_clean(at)


def test_a_sweep_over_the_budget_is_refused_with_its_estimate():
    at = open_page("timing")
    at.selectbox(key="timing.batch").set_value(4)
    at.selectbox(key="timing.heads").set_value(16)
    at.selectbox(key="timing.d_model").set_value(512)
    at.selectbox(key="timing.dtype").set_value("float64")
    _press_run(at, lengths=(1024,))
    message = errors(at)
    assert f"sweep budget of {formats.size(results.SWEEP_BYTES)} (ATTNVIZ_SWEEP_MB)" in message
    assert re.search(r"needs about [\d.,]+ [KMG]iB at its largest case", message), message
    assert not figures(at)


def test_timing_choices_come_back_from_the_link():
    at = open_page("timing", {"timing.heads": "4", "timing.dtype": "float64"})
    assert at.selectbox(key="timing.heads").value == 4 and at.selectbox(key="timing.dtype").value == "float64"


# -- error details ---------------------------------------------------------------------------


def test_the_served_app_shows_short_error_details_and_spends_no_time_between_runs():
    """`streamlit run app.py` reads .streamlit/config.toml: visitors see an error's type only; no
    session walks every imported module on the event loop (0.68 s a session with PyTorch,
    TensorFlow and transformers imported: a class of 30 joining held every page ~20 s); and no run
    ends in a full garbage collection (0.15 s with PyTorch, 0.31 s with TensorFlow too, after every
    run and every fragment's rerun)."""
    code = (
        "import streamlit.config as c, streamlit.web.bootstrap as b; b.load_config_options({}); "
        "print(c.get_option('client.showErrorDetails'), c.get_option('server.fileWatcherType'),"
        " c.get_option('runner.postScriptGC'))"
    )
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("STREAMLIT_")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env)
    assert out.stdout.strip().splitlines()[-1] == "type none False", out.stderr[-500:]


# -- one check per rerun; defaults that draw; disabled controls show what is in force --------


def test_a_rerun_checks_the_configuration_once_and_builds_the_heads_once(monkeypatch):
    """Issue 16: settings.check ran twice per rerun, and the interpretable heads were built to
    validate and again to run (and again to time)."""
    calls = {"check": 0, "build": 0}
    real_check, real_build = settings.check, heads.build

    def check(*args, **kwargs):
        calls["check"] += 1
        return real_check(*args, **kwargs)

    def build(*args, **kwargs):
        calls["build"] += 1
        return real_build(*args, **kwargs)

    monkeypatch.setattr(settings, "check", check)
    monkeypatch.setattr(heads, "build", build)
    results.CACHE.clear()
    runs._CHECKED.clear()
    at = open_page("explorer", {"weights": "interpretable", "seed": "4242", "len_q": "7"})
    assert len(heatmaps(figures(at)[0])) == 4
    assert calls == {"check": 1, "build": 1}


@pytest.mark.parametrize("weights", ["random", "interpretable"])
@pytest.mark.parametrize("source", ["random", "sentence"])
@pytest.mark.parametrize("mode", ["self", "cross"])
def test_the_defaults_draw_in_every_mode(weights, source, mode):
    """Issue 21 §2: interpretable → sentence → cross said "Nothing to draw yet" with the defaults."""
    at = open_page("explorer", {"weights": weights, "input": source, "mode": mode})
    assert "Nothing to draw" not in warnings(at), warnings(at)
    assert not errors(at, "sidebar"), errors(at, "sidebar")
    panels = heatmaps(figures(at)[0])
    cfg = {key: at.session_state.get(key, v) for key, v in settings.DEFAULTS.items()}
    len_q, len_kv = settings.lengths(cfg)
    assert array(panels[0]["z"]).shape == (len_q, len_kv)


def test_a_bad_custom_mask_in_a_link_draws_from_a_causal_mask():
    """Issue 21 §2: the note said "the editor starts from a causal mask instead", then nothing drew."""
    at = open_page("explorer", {"mask": "custom", "custom_mask": "not-a-mask", "len_q": "5"})
    assert "starts from a causal mask instead" in warnings(at, "sidebar")
    assert "Nothing to draw" not in warnings(at)
    z = array(heatmaps(figures(at)[0])[0]["z"])
    assert z.shape == (5, 5)
    assert (z[np.triu_indices(5, 1)] == 0).all() and (z[np.tril_indices(5)] > 0).all()


def test_disabled_controls_show_the_value_in_force():
    """Issue 21 §2: d_kv_in showed 32 after d_model 64; len_q showed 8 with an 11-word sentence."""
    at = open_page("explorer")
    at.number_input(key="d_model").set_value(64).run()
    assert at.number_input(key="d_kv_in").disabled and at.number_input(key="d_kv_in").value == 64
    at.radio(key="input").set_value("sentence").run()
    words = len(settings.DEFAULTS["sentence"].split())
    assert at.slider(key="len_q").disabled and at.slider(key="len_q").value == words
    assert at.slider(key="len_kv").disabled and at.slider(key="len_kv").value == words  # self: the queries
    at.text_input(key="sentence").set_value("one two three").run()
    assert at.slider(key="len_q").value == 3
    assert_clean(at)


def test_of_max_is_the_entropy_each_row_can_reach():
    """Issue 21 §1: with a causal mask, random heads read 61–63 % "of max" (divided by log Lk)
    while each row was near the entropy its allowed keys allow."""
    at = open_page("explorer", {"mask": "causal", "len_q": "8"})
    panels = [array(p["z"]) for p in heatmaps(figures(at)[0])]
    table = at.dataframe[0].value
    for h, w in enumerate(panels):  # (Lq, Lk) weights as drawn; row i may see keys 0..i
        rows = range(1, w.shape[0])
        expected = np.mean([-(w[i, : i + 1] * np.log(w[i, : i + 1])).sum() / np.log(i + 1) for i in rows])
        assert table["of max"][h] == f"{expected:.0%}"
        assert expected > 0.8  # random heads are nearly as spread as their rows allow
    caption = " ".join(c.value for c in at.caption)
    assert "allows that row" in caption


def test_the_forward_time_says_what_it_includes_and_links_timing():
    at = open_page("explorer")
    caption = " ".join(c.value for c in at.caption)
    assert "eager dispatch" in caption
    assert "timing" in {link.proto.page for link in at.get("page_link")}


# -- modern attention controls (AttentionSpec.n_kv_heads, rope_base, window), bound to the URL -------


def test_kv_heads_offer_only_divisors_and_window_needs_causal():
    at = open_page("explorer", {"n_heads": "4"})
    kv = at.select_slider(key="n_kv_heads")
    assert kv.options == ["1", "2", "4 (one per head)"]
    assert at.number_input(key="window").disabled  # no causal mask: no window
    at.selectbox(key="mask").set_value("causal").run()
    assert not at.number_input(key="window").disabled
    at.select_slider(key="n_heads").set_value(8).run()  # d_model 32: 8 heads of 4
    assert at.select_slider(key="n_kv_heads").options == ["1", "2", "4", "8 (one per head)"]
    assert_clean(at)


def test_a_link_with_gqa_rope_and_a_window_draws_them():
    query = {"n_kv_heads": "2", "rope_base": "10000", "mask": "causal", "window": "3", "len_q": "6"}
    at = open_page("explorer", query)
    assert_clean(at)
    for key, value in query.items():
        assert at.query_params[key] in (value, [value]), key
    spec = runs.checked(settings.from_query(query)[0])
    assert spec.spec.n_kv_heads == 2 and spec.spec.rope_base == 10000.0 and spec.spec.window == 3
    z = array(heatmaps(figures(at)[0])[0]["z"])
    i, j = np.indices(z.shape)
    assert (z[(j > i) | (j <= i - 3)] == 0).all() and (z[(j <= i) & (j > i - 3)] > 0).all()
    steps = {row for row in at.dataframe[-1].value["step"]}
    assert {"q_rope", "k_rope", "k_repeated"} <= steps


def test_kv_heads_that_no_longer_divide_are_repaired_with_a_note():
    at = open_page("explorer", {"n_kv_heads": "2", "n_heads": "4"})
    at.select_slider(key="n_heads").set_value(1).run()
    assert at.session_state["n_kv_heads"] == 0
    assert_clean(at)


@pytest.mark.parametrize("weights", ["random", "interpretable"])
def test_the_first_charts_reference_preview_shows_what_the_framework_computes(weights):
    """Issue 21 §3: before the framework loads, the explorer draws attnviz.reference's weights
    (float64 NumPy) for the same spec, inputs and parameters: the run that follows agrees."""
    from attnviz.app.explorer import preview

    cfg = {**settings.DEFAULTS, "weights": weights, "mask": "causal", "input": "sentence"}
    expected = runs.run(cfg).weights
    got = preview.reference_weights(cfg)
    assert got.dtype == np.float64 and got.shape == expected.shape
    np.testing.assert_allclose(got, expected, atol=1e-5)


def test_a_pattern_is_one_click_from_random_weights_and_back():
    """Issue 19 §3: the explorer's random first view offers the hand-built heads in one click
    (a sentence, a causal mask), and random weights are one click back; both stay in the link."""
    at = open_page("explorer")
    at.button[0].click().run()
    assert_clean(at)
    for key, value in controls.PATTERN.items():
        assert at.session_state[key] == value and at.query_params[key] in (value, [value])
    previous = array(heatmaps(figures(at)[0])[0]["z"])
    words = len(settings.DEFAULTS["sentence"].split())
    assert previous.shape == (words, words)
    assert all(previous[i, i - 1] >= 0.9 for i in range(1, words))
    at.button[0].click().run()
    assert at.session_state["weights"] == "random"
