"""Every control at its extremes: no exception anywhere, an explanation wherever a value is refused."""

import pytest

from attnviz.settings import CHOICES, LIMITS, MAX_TEXT
from tests.app.conftest import assert_clean, errors, figures, open_page

# widget key → (kind, page context needed to show it)
NUMERIC = {
    "batch": ("number_input", {}),
    "len_q": ("slider", {}),
    "len_kv": ("slider", {"mode": "cross"}),
    "d_model": ("number_input", {}),
    "n_heads": ("select_slider", {"d_k": "8", "d_v": "8"}),  # every count: d_k and d_v set
    "d_k": ("number_input", {}),
    "d_v": ("number_input", {}),
    "d_kv_in": ("number_input", {"mode": "cross"}),
    "valid_kv_len": ("number_input", {"mask": "padding"}),
    "seed": ("number_input", {}),
    "dropout": ("slider", {"training": "1"}),
    "scale": ("number_input", {}),
}
CASES = [(name, bound) for name in NUMERIC for bound in (0, 1)]


def assert_shown_or_explained(at) -> None:
    assert_clean(at)
    if not figures(at):
        said = [*at.main.warning, *at.main.error]
        assert said, "a refused configuration must say why"
        assert all(len(e.value) > 30 for e in said)


@pytest.mark.parametrize(("name", "bound"), CASES, ids=[f"{n}-{'max' if b else 'min'}" for n, b in CASES])
def test_numeric_control_at_extreme(name, bound):
    kind, context = NUMERIC[name]
    at = open_page("explorer", context)
    value = LIMITS[name][bound]
    if name == "valid_kv_len":
        value = min(value, 8)
    getattr(at, kind)(key=name).set_value(value).run()
    assert_shown_or_explained(at)
    assert at.session_state[name] == value


@pytest.mark.parametrize(
    ("name", "option"),
    [
        (name, option)
        for name in ("input", "mode", "mask", "dtype", "framework", "weights")
        for option in CHOICES[name]
    ],
)
def test_every_option(name, option):
    at = open_page("explorer")
    widget = at.selectbox(key="mask") if name == "mask" else at.radio(key=name)
    widget.set_value(option).run()
    assert_shown_or_explained(at)


@pytest.mark.parametrize("name", ["bias", "training", "residual_norm"])
def test_every_checkbox(name):
    at = open_page("explorer", {"dropout": "0.5"})
    at.checkbox(key=name).set_value(not at.checkbox(key=name).value).run()
    assert_shown_or_explained(at)


@pytest.mark.parametrize("text", ["", "   ", "!" * MAX_TEXT, "word " * (MAX_TEXT // 5)])
def test_empty_and_very_long_sentences(text):
    at = open_page("explorer", {"input": "sentence"})
    at.text_input(key="sentence").set_value(text).run()
    assert_shown_or_explained(at)
    if not text.strip():
        assert "allowed: a text with at least one word" in errors(at, "sidebar"), "next to the control"


@pytest.mark.parametrize("page", ["explorer", "steps", "compare"])
def test_custom_mask_with_every_cell_blocked(page):
    at = open_page(page, {"mask": "custom", "custom_mask": ".".join(["0" * 8] * 8)})
    assert_shown_or_explained(at)
    if page == "explorer":
        assert "no allowed key" in at.warning[0].value


@pytest.mark.parametrize("page", ["steps", "compare"])
@pytest.mark.parametrize(
    "query",
    [
        {"len_q": "1", "n_heads": "1", "d_model": "1"},
        {"len_q": "512", "n_heads": "16", "d_model": "1024"},
        {"mode": "cross", "len_q": "1", "len_kv": "512"},
        {"d_k": "256", "d_v": "1", "scale": "100"},
    ],
)
def test_other_pages_at_extremes(page, query):
    at = open_page(page, query)
    assert_shown_or_explained(at)
