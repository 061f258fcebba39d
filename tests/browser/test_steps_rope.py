"""Chromium, issue 33: the Step-by-step RoPE pairs plot as drawn shows both axes at one scale — a unit
of feature i spans as many pixels as a unit of feature i + d/2 — at 1440 and 390 px, so each pair's
circle is a circle and the caption's fact (each pair keeps its length) is what the reader sees.
Screenshots go to test-artifacts/steps-rope-*.png."""

from __future__ import annotations

import pytest

from tests.browser.conftest import assert_no_exception, new_context, painted, settle, shot

VIEWPORTS = {"desktop": (1440, 900), "phone": (390, 844)}
# Pixels per data unit on each axis of the pairs plot, as Plotly laid it out in this browser.
SCALES_JS = """() => {
  const gd = [...document.querySelectorAll('.js-plotly-plot')]
    .find(g => g._fullLayout && ((g.layout.title || {}).text || '').includes('Pairs (i, i+d/2)'));
  if (!gd) return null;
  gd.scrollIntoView();
  const per = a => a._length / (a.range[1] - a.range[0]);
  const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
  return {x: per(xa), y: per(ya), xrange: xa.range, yrange: ya.range};
}"""


@pytest.mark.parametrize("viewport", list(VIEWPORTS))
def test_the_pairs_plot_is_drawn_at_one_scale(server, browser, viewport):
    ctx = new_context(browser, VIEWPORTS[viewport])
    page = ctx.new_page()
    page.goto(f"{server.url}/steps?rope_base=10000&steps.pos=5")
    settle(page)
    assert_no_exception(page)
    page.wait_for_function(f"() => ({SCALES_JS})() !== null")
    painted(page)
    drawn = page.evaluate(SCALES_JS)
    assert drawn["x"] > 10 and abs(drawn["x"] - drawn["y"]) <= 0.01 * drawn["x"], drawn  # px per unit, equal
    assert drawn["xrange"] == drawn["yrange"] and drawn["xrange"][0] == -drawn["xrange"][1], drawn  # centred
    shot(page, f"steps-rope-{viewport}")
    ctx.close()
