"""Chromium: the Interpretability page's Score parts tab on a tiny random GPT-2 offered through
`ATTNVIZ_CHECKPOINTS` — a click on a cell of the head's pattern (its marker found from the chart's
own layout, so the click lands whatever the viewport) puts that cell's query and key in the URL and
the split redraws for it, no exception. Screenshot: test-artifacts/interpret-parts.png.
"""

from __future__ import annotations

from urllib.parse import parse_qs, quote, urlparse

import pytest

from tests.browser.conftest import Server, assert_no_exception, new_context, painted, settle, shot

pytest.importorskip("transformers", reason="transformers builds the test's GPT-2")

FIRST_RUN_MS = 600_000  # the first split starts a worker process (torch imported at nice +10)
TEXT = "the cat sat on the mat. the cat"
TITLE = "Click a cell"
# Page coordinates of the pattern's cell (query, key), read from the chart's layout, the cell brought
# to mid-screen in the page's scrolling container first.
CELL_JS = """([title, query, key]) => {
  const gd = [...document.querySelectorAll('.js-plotly-plot')]
    .find(g => g._fullLayout && ((g.layout.title || {}).text || '').includes(title));
  const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
  const where = () => {
    const box = gd.getBoundingClientRect();
    return [box.left + xa._offset + xa.l2p(key), box.top + ya._offset + ya.l2p(query)];
  };
  let scroller = gd.parentElement;
  while (scroller && !(scroller.scrollHeight > scroller.clientHeight && getComputedStyle(scroller).overflowY !== 'visible')) {
    scroller = scroller.parentElement;
  }
  if (scroller) scroller.scrollTop += where()[1] - window.innerHeight / 2;
  return where();
}"""
DRAWN_JS = """(title) => [...document.querySelectorAll('.js-plotly-plot')]
  .some(g => g._fullLayout && ((g.layout.title || {}).text || '').includes(title))"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from tests.pretrained.test_gpt2 import make_tiny_gpt2

    root = tmp_path_factory.mktemp("decoders")
    make_tiny_gpt2(root / "tiny-gpt2")
    srv = Server(env={"ATTNVIZ_CHECKPOINTS": str(root)})
    yield srv
    srv.stop()


def cell_in_url(page) -> tuple[list[str], list[str]]:
    query = parse_qs(urlparse(page.url).query)
    return query.get("interp.parts_query", []), query.get("interp.parts_key", [])


def test_a_click_on_a_cell_picks_its_query_and_key(server, browser):
    ctx = new_context(browser, (1440, 900))
    page = ctx.new_page()
    page.goto(
        f"{server.url}/interpret?interp.checkpoint=tiny-gpt2&interp.tab=Score+parts&interp.parts_text={quote(TEXT)}"
        "&interp.parts_head=L1.H2&interp.parts_query=3&interp.parts_key=1"
    )
    settle(page, FIRST_RUN_MS)
    assert_no_exception(page)
    page.wait_for_function(DRAWN_JS, arg=TITLE, timeout=FIRST_RUN_MS)
    x, y = page.evaluate(CELL_JS, [TITLE, 6, 4])
    page.mouse.move(x, y)
    hover = page.locator(".hoverlayer .hovertext").first
    hover.wait_for(state="attached", timeout=30_000)
    assert "query 6" in hover.text_content() and "key 4" in hover.text_content()
    page.mouse.click(x, y)
    page.wait_for_function("() => location.search.includes('interp.parts_query=6')", timeout=FIRST_RUN_MS)
    settle(page, FIRST_RUN_MS)
    assert cell_in_url(page) == (["6"], ["4"])
    assert page.get_by_text("query 6 (").count() > 0  # the split redrawn for the clicked cell
    painted(page)
    shot(page, "interpret-parts")
    assert_no_exception(page)
    ctx.close()
