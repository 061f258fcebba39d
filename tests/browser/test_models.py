"""Chromium: the Compare-models page (issue 31 §3) on a tiny random Llama beside a tiny random Gemma 3
(local and global layers), offered through `ATTNVIZ_CHECKPOINTS` — it renders, a role change redraws
the role chart and writes the URL, the URL opened in a new tab reopens the same view, no exception.
Screenshots at 1440×900 and 390×844 go to test-artifacts/models-*.png.
"""

from __future__ import annotations

import pytest

from tests.browser.conftest import (
    Server,
    assert_no_exception,
    click_and_settle,
    new_context,
    painted,
    settle,
    shot,
)
from tests.browser.test_trust_pages import chart_layout_problems

pytest.importorskip("transformers", reason="transformers builds the test's decoders")

VIEWPORTS = {"desktop": (1440, 900), "phone": (390, 844)}
FIRST_RUN_MS = (
    600_000  # the first comparison starts a worker process and loads both models: minutes under load
)
LINK = "/models?models.first=tiny-llama&models.second=tiny-gemma&models.text=The%20cat%20sat%20on&models.half=6&models.n=2"
# A chart drawn by Plotly, by a part of its title: its title and each model's markers (layer, kind).
CHART_JS = """(start) => {
  const gd = [...document.querySelectorAll('.js-plotly-plot')]
    .find(g => g._fullLayout && ((g.layout.title || {}).text || '').includes(start));
  if (!gd) return null;
  const markers = gd._fullData.filter(t => t.mode === 'markers')
    .map(t => [t.meta.model, t.meta.kind, Array.from(t.customdata)]);
  return {title: gd.layout.title.text.replace(/<[^>]+>/g, ''), markers};  // the theme wraps it in <b>
}"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from tests.kernels.test_decoding import make_tiny_gemma
    from tests.pretrained.test_llama import make_tiny_llama

    root = tmp_path_factory.mktemp("pair")
    make_tiny_llama(root / "tiny-llama")
    make_tiny_gemma(root / "tiny-gemma")
    srv = Server(env={"ATTNVIZ_CHECKPOINTS": str(root)})
    yield srv
    srv.stop()


def chart(page, part: str, timeout: int = 60_000) -> dict:
    page.wait_for_function(f"() => ({CHART_JS})({part!r}) !== null", timeout=timeout)
    return page.evaluate(CHART_JS, part)


def role_in_url(page) -> str | None:
    return page.evaluate("() => new URLSearchParams(location.search).get('models.role')")


@pytest.mark.parametrize("viewport", list(VIEWPORTS))
def test_a_role_change_redraws_and_the_link_reopens_it(server, browser, viewport):
    ctx = new_context(browser, VIEWPORTS[viewport])
    page = ctx.new_page()
    page.goto(server.url + LINK)
    settle(page, FIRST_RUN_MS)
    assert_no_exception(page)
    sink = chart(page, "Weight on the first token", FIRST_RUN_MS)
    # every layer of each model drawn once, Gemma's by kind: local 0, 1, 3 and global 2
    assert sorted((m, k, layers) for m, k, layers in sink["markers"]) == [
        ("tiny-gemma", "global", [2]), ("tiny-gemma", "local", [0, 1, 3]), ("tiny-llama", "global", [0, 1]),
    ]  # fmt: skip
    assert chart(page, "Strongest ")["title"] == "Strongest previous token head, by layer"
    click_and_settle(page, page.get_by_text("induction", exact=True))
    page.wait_for_function("() => new URLSearchParams(location.search).get('models.role') === 'induction'")
    assert chart(page, "Strongest ")["title"] == "Strongest induction head, by layer"  # redrawn
    painted(page)
    problems = chart_layout_problems(page)  # issue 46, point 19: on a phone the titles lay under the toolbar
    assert not problems, "\n".join(problems)
    shot(page, f"models-{viewport}")
    assert_no_exception(page)
    again = ctx.new_page()  # the link, in a new tab
    again.goto(page.url)
    settle(again, FIRST_RUN_MS)
    assert role_in_url(again) == "induction"
    assert chart(again, "Strongest ")["title"] == "Strongest induction head, by layer"
    assert chart(again, "Weight on the first token") == sink
    assert_no_exception(again)
    ctx.close()
