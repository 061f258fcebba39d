"""Chromium: the Decoding page (issue 29 §2) on a tiny random GPT-2 offered through
`ATTNVIZ_CHECKPOINTS` — it renders, a step change (the slider, by keyboard) moves the outlined query
row and the URL, the URL opened in a new tab reopens the same step, no exception. Screenshots at
1440×900 and 390×844 go to test-artifacts/decoding-*.png; at both, no chart's title, colour bar or names
cover each other or run out of the chart (`test_trust_pages.chart_layout_problems`).
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest

from tests.browser.conftest import Server, assert_no_exception, new_context, painted, settle, shot
from tests.browser.test_trust_pages import chart_layout_problems

pytest.importorskip("transformers", reason="transformers builds the test's GPT-2")

VIEWPORTS = {"desktop": (1440, 900), "phone": (390, 844)}
FIRST_RUN_MS = (
    600_000  # the first trace starts a worker process (torch imported at nice +10): minutes under load
)
TITLE = "over the cache"  # the query rows' chart
# The rows chart as the reader's browser holds it: rows drawn (z) and the outlined row.
ROWS_JS = """(title) => {
  const gd = [...document.querySelectorAll('.js-plotly-plot')]
    .find(g => g._fullLayout && ((g.layout.title || {}).text || '').includes(title));
  if (!gd) return null;
  const rect = (gd.layout.shapes || []).find(s => s.name === 'new row');
  return {rows: gd._fullData[0].z.length, outlined: (rect.y0 + rect.y1) / 2};
}"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from tests.pretrained.test_gpt2 import make_tiny_gpt2

    root = tmp_path_factory.mktemp("decoders")
    make_tiny_gpt2(root / "tiny-gpt2")
    srv = Server(env={"ATTNVIZ_CHECKPOINTS": str(root)})
    yield srv
    srv.stop()


def rows(page) -> dict:
    page.wait_for_function(f"() => ({ROWS_JS})({TITLE!r}) !== null", timeout=FIRST_RUN_MS)
    return page.evaluate(ROWS_JS, TITLE)


def step_in_url(page) -> list[str]:
    return parse_qs(urlparse(page.url).query).get("decoding.step", [])


@pytest.mark.parametrize("viewport", list(VIEWPORTS))
def test_a_step_change_moves_the_new_row_and_the_link_reopens_it(server, browser, viewport):
    ctx = new_context(browser, VIEWPORTS[viewport])
    page = ctx.new_page()
    page.goto(
        f"{server.url}/decoding?decoding.checkpoint=tiny-gpt2&decoding.text=The%20cat%20sat&decoding.new_tokens=5"
    )
    settle(page, FIRST_RUN_MS)
    assert_no_exception(page)
    assert rows(page) == {"rows": 1, "outlined": 0}  # step 1: one query row, outlined
    slider = page.get_by_role("slider", name="Step: the new token")
    slider.focus()
    for _ in range(2):
        slider.press("ArrowRight")
    page.wait_for_function("() => new URLSearchParams(location.search).get('decoding.step') === '3'")
    settle(page)
    page.wait_for_function(f"() => {{ const r = ({ROWS_JS})({TITLE!r}); return r && r.rows === 3; }}")
    assert rows(page) == {"rows": 3, "outlined": 2}  # the step change redrew the figure
    assert step_in_url(page) == ["3"]
    painted(page)
    shot(page, f"decoding-{viewport}")
    assert_no_exception(page)
    # issue 46's phone walk: the K and V cache charts' colour-bar names were cut ("k fe") at 390 px
    problems = chart_layout_problems(page)
    assert not problems, "\n".join(problems)
    again = ctx.new_page()  # the link, in a new tab
    again.goto(page.url)
    settle(again)
    assert again.get_by_role("slider", name="Step: the new token").input_value() == "3"
    assert rows(again) == {"rows": 3, "outlined": 2}
    assert_no_exception(again)
    ctx.close()
