"""The app's state and limits: valid choices only, links, pages list, caches, sweeps, routing, errors."""

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from attnviz import heads
from attnviz.ui import cache, config, controls
from attnviz.ui.pages import PAGES
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


def test_home_links_to_every_routed_page():
    at = open_page("home")
    linked = {link.proto.label for link in at.get("page_link")}
    assert linked == {p.title for p in PAGES if p.path != "pages/home.py"}
    app = (ROOT / "app.py").read_text()
    assert "PAGES" in app and "st.Page(p.path" in app, "app.py routes the same list"


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


def test_timing_measures_what_run_computes(monkeypatch):
    seen = {}

    def spy(name, real):
        def call(spec, framework, device, **kwargs):
            seen[name] = kwargs
            return real(spec, framework, device, **kwargs)

        return call

    monkeypatch.setattr(controls, "run_attention", spy("run", controls.run_attention))
    monkeypatch.setattr(controls, "time_attention", spy("time", controls.time_attention))
    cache.CACHE.clear()
    cfg = {**config.DEFAULTS, "weights": "interpretable", "len_q": 6, "seed": 3}
    result, timing = controls.run(cfg), controls.timing(cfg)
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
    code = config.encode_mask(mask)
    assert len(code) <= 43_700 and set(code) <= set(
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_."
    )
    assert np.array_equal(config.decode_mask(code, 512, 512), mask)
    if kind != "random":
        assert len(code) < 6_000, "structured masks stay short"


def test_small_masks_stay_readable_and_old_links_decode():
    mask = np.tril(np.ones((4, 4), bool))
    assert config.encode_mask(mask) == "1000.1100.1110.1111"
    assert np.array_equal(config.decode_mask("1000.1100.1110.1111", 4, 4), mask)
    assert config.decode_mask("10.11", 3, 3).tolist() == [[1, 0, 1], [1, 1, 1], [1, 1, 1]]


def test_a_mask_that_cannot_fit_a_link_gets_a_clear_message(monkeypatch):
    monkeypatch.setattr(config, "MAX_MASK_CODE", 1000)
    with pytest.raises(config.SpecError, match="fits in 1,000 characters") as caught:
        config.encode_mask(np.random.default_rng(0).random((100, 100)) < 0.5)
    assert caught.value.field == "custom_mask"


@pytest.mark.parametrize(
    "code", ["r1x1.1.zzzzzzzzzz", "r4x4.2.16", "p9999x9999.AAAA", "10x.1", "r4x4.1.0.16"]
)
def test_hostile_mask_codes_are_refused_without_allocating(code):
    start = time.perf_counter()
    assert config.mask_code_problem(code) is not None
    assert time.perf_counter() - start < 0.5
    assert config.decode_mask(code, 3, 3).tolist() == np.tril(np.ones((3, 3), bool)).tolist()


def test_a_large_custom_mask_link_opens():
    code = config.encode_mask(np.abs(np.subtract.outer(np.arange(300), np.arange(300))) <= 2)
    at = open_page("explorer", {"mask": "custom", "len_q": "300", "custom_mask": code})
    assert_clean(at)
    assert at.session_state["custom_mask"] == code and figures(at)


# -- caches bounded by bytes ----------------------------------------------------------------


def test_cache_evicts_least_recently_used_by_bytes():
    store = cache.ByteCache(budget=3 * 800_000)
    arrays = {k: np.zeros(100_000) for k in "abcd"}  # 800 kB each
    for k in "abc":
        assert store.put(k, arrays[k], ttl=60)
    store.get("a")
    store.put("d", arrays["d"], ttl=60)
    assert [k for k in "abcd" if store.get(k)[0]] == ["a", "c", "d"]
    assert store.stats()["bytes"] <= store.budget
    assert not store.put("huge", np.zeros(400_000), ttl=60), "an entry over the whole budget is not kept"


def test_cache_entries_expire():
    store = cache.ByteCache(budget=10**6)
    store.put("k", np.zeros(10), ttl=0.05)
    assert store.get("k")[0]
    time.sleep(0.1)
    assert not store.get("k")[0] and store.stats()["bytes"] == 0


def test_bounded_returns_a_copy_per_call():
    calls = []

    @cache.bounded("test copies")
    def make(n: int):
        calls.append(n)
        return {"a": np.zeros(n)}

    first = make(3)
    first["a"][:] = 7
    assert make(3)["a"].tolist() == [0, 0, 0] and calls == [3]


def test_cache_budget_comes_from_the_environment():
    code = "from attnviz.ui import cache; print(cache.CACHE.budget, cache.SWEEP_BYTES, cache.MAX_CONCURRENT_RUNS)"
    env = {
        "ATTNVIZ_CACHE_MB": "64",
        "ATTNVIZ_SWEEP_MB": "nan",
        "ATTNVIZ_MAX_CONCURRENT_RUNS": "3",
        "PATH": "",
    }
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env)
    assert out.stdout.split() == [str(64 * 2**20), str(1024 * 2**20), "3"], out.stderr[-500:]


MEMORY_SCRIPT = """
import json, sys
from tests.app.conftest import open_page
from tests.browser.load import rss_bytes
import os
from attnviz.ui import cache
at = open_page("explorer", {"len_q": "512", "n_heads": "16", "d_model": "16"})
base = rss_bytes(os.getpid())
peak, held = 0, []
for seed in range(1, 13):
    at.number_input(key="seed").set_value(seed).run()
    assert not at.exception, at.exception
    peak = max(peak, rss_bytes(os.getpid()))
    held.append(cache.CACHE.stats()["bytes"])
print(json.dumps({"base": base, "peak": peak, "held": held, "budget": cache.CACHE.budget}))
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


# -- Timing: one sweep at a time, each within budget ---------------------------------------


def _press_run(at, lengths=(16,)):
    at.multiselect(key="timing.impls").set_value(["attnviz-torch"])
    at.multiselect(key="timing.lengths").set_value(list(lengths))
    at.number_input(key="timing.repeats").set_value(3)
    at.button[0].click().run()
    assert_clean(at)


def test_a_second_sweep_waits_for_the_first():
    at = open_page("timing")
    with cache.sweep_slot() as held:  # another visitor's sweep
        assert held
        _press_run(at)
    assert "Another visitor's benchmark is running" in warnings(at) and not figures(at)
    _press_run(at)
    assert len(figures(at)) == 4, "the slot is free again once the first sweep ended"


def test_a_sweep_over_the_budget_is_refused_with_its_estimate():
    at = open_page("timing")
    at.selectbox(key="timing.batch").set_value(4)
    at.selectbox(key="timing.heads").set_value(16)
    at.selectbox(key="timing.d_model").set_value(512)
    at.selectbox(key="timing.dtype").set_value("float64")
    _press_run(at, lengths=(1024,))
    message = errors(at)
    assert "MiB" in message and "sweep budget" in message and "ATTNVIZ_SWEEP_MB" in message
    assert not figures(at)


def test_timing_choices_come_back_from_the_link():
    at = open_page("timing", {"timing.heads": "4", "timing.dtype": "float64"})
    assert at.selectbox(key="timing.heads").value == 4 and at.selectbox(key="timing.dtype").value == "float64"


# -- routing, error details -----------------------------------------------------------------


def test_routing_reruns_a_page_that_ran_without_app_py(monkeypatch):
    from streamlit.runtime.pages_manager import PagesManager

    from attnviz.ui import routing

    reruns = []
    monkeypatch.setattr(routing.st, "rerun", lambda: reruns.append(1))
    monkeypatch.setattr(PagesManager, "uses_pages_directory", True)
    routing.ensure_navigation()  # a deep link's first run: legacy routing
    assert PagesManager.uses_pages_directory is False and reruns == [1]
    routing.ensure_navigation()  # a run that started in legacy mode before another session switched
    assert reruns == [1, 1]
    routing.mark_routed()  # app.py ran first: nothing to do
    routing.ensure_navigation()
    assert reruns == [1, 1]


def test_routing_degrades_when_streamlit_drops_the_flag(monkeypatch):
    from streamlit.runtime.pages_manager import PagesManager

    from attnviz.ui import routing

    monkeypatch.delattr(PagesManager, "uses_pages_directory")
    monkeypatch.setattr(routing.st, "rerun", lambda: pytest.fail("no rerun without the flag"))
    routing.ensure_navigation()  # no AttributeError, no rerun loop


def test_visitors_see_short_error_details():
    code = (
        "import streamlit.config as c, streamlit.web.bootstrap as b; "
        "b.load_config_options({}); print(c.get_option('client.showErrorDetails'))"
    )
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("STREAMLIT_")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env)
    assert out.stdout.strip().splitlines()[-1] == "type", out.stderr[-500:]
