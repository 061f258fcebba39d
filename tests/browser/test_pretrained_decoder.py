"""Chromium: the Pretrained page on a decoder (a tiny random GPT-2 made here, offered through
`ATTNVIZ_CHECKPOINTS` to a server of its own): the causal head view and the neuron view.
Screenshots at 1440×900 and 390×844 go to test-artifacts/pretrained-decoder-*.png.
"""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import assert_no_exception, painted, settle, shot
from tests.live import Server

pytest.importorskip("transformers", reason="transformers builds the test's GPT-2")

VIEWPORTS = {"desktop": (1440, 900), "phone": (390, 844)}
TEXT = "The cat sat on the mat."
# (query y, key y) of every line the head view draws.
LINES_JS = """() => {
  const gd = [...document.querySelectorAll('.js-plotly-plot')].find(g => ((g.layout.title || {}).text || '').includes('Head view'));
  const out = [];
  for (const t of gd._fullData.filter(t => t.mode === 'lines')) {
    const ys = Array.from(t.y).filter(v => v !== null && !Number.isNaN(v));
    for (let i = 0; i < ys.length; i += 2) out.push([ys[i], ys[i + 1]]);
  }
  return out;
}"""
HAS_CHART_JS = """(title) => [...document.querySelectorAll('.js-plotly-plot')].some(g => g.layout
  && (((g.layout.title || {}).text || '').includes(title) || (g.layout.annotations || []).some(a => (a.text || '').startsWith(title))))"""
SCROLL_JS = """(title) => [...document.querySelectorAll('.js-plotly-plot')].find(g => g.layout
  && (g.layout.annotations || []).some(a => (a.text || '').startsWith(title))).scrollIntoView()"""
META_JS = """(title) => {
  const gd = [...document.querySelectorAll('.js-plotly-plot')].find(g => ((g.layout.title || {}).text || '') === title
     || (g.layout.annotations || []).some(a => (a.text || '').startsWith(title)));
  return gd ? gd.layout.meta : null;
}"""


@pytest.fixture(scope="module")
def gpt_server(tmp_path_factory):
    from tests.pretrained.test_gpt2 import make_tiny_gpt2

    root = tmp_path_factory.mktemp("checkpoints")
    make_tiny_gpt2(root / "tiny-gpt2")
    srv = Server(env={"ATTNVIZ_CHECKPOINTS": str(root)})
    yield srv
    srv.stop()


def url(server, **state) -> str:
    return f"{server.url}/pretrained?" + urlencode({"pre.checkpoint": "tiny-gpt2", "pre.text": TEXT, **state})


@pytest.mark.parametrize("viewport", list(VIEWPORTS))
def test_decoder_head_view_draws_only_causal_lines(gpt_server, new_page, viewport):
    page = new_page(VIEWPORTS[viewport])
    page.goto(url(gpt_server, **{"pre.tab": "Head view", "pre.layer": "1"}))
    settle(page)
    assert_no_exception(page)
    expect(page.get_by_text("causal decoder", exact=False).first).to_be_visible(timeout=60_000)
    page.wait_for_function(HAS_CHART_JS, arg="Head view", timeout=60_000)
    drawn = page.evaluate(LINES_JS)
    assert drawn and all(k >= q for q, k in drawn), drawn  # a key at or before its query (y = -index)
    assert any(k > q for q, k in drawn)  # and not only to itself
    page.evaluate(
        SCROLL_JS.replace(
            "(g.layout.annotations || []).some(a => (a.text || '').startsWith(title))",
            "((g.layout.title || {}).text || '').includes(title)",
        ),
        "Head view",
    )
    painted(page)
    shot(page, f"pretrained-decoder-head-view-{viewport}")


@pytest.mark.parametrize("viewport", list(VIEWPORTS))
def test_neuron_view_shows_q_k_and_the_masked_softmax(gpt_server, new_page, viewport):
    page = new_page(VIEWPORTS[viewport])
    page.goto(url(gpt_server, **{"pre.tab": "Neuron view", "pre.layer": "1", "pre.neuron_query": "3: s"}))
    settle(page)
    assert_no_exception(page)
    page.wait_for_function(HAS_CHART_JS, arg="query q", timeout=60_000)
    meta = page.evaluate(META_JS, "query q")
    assert meta is not None and meta["query"] == 3
    assert meta["masked"] and meta["masked"][0] == 4  # the keys after the query are masked
    assert abs(sum(meta["weights"]) - 1) < 1e-5 and all(w == 0 for w in meta["weights"][4:])
    expect(page.get_by_text("softmax: the attention weights").first).to_be_attached()
    page.evaluate(SCROLL_JS, "query q")  # the figure, not the page's top, in the screenshot
    painted(page)
    shot(page, f"pretrained-decoder-neuron-view-{viewport}")
