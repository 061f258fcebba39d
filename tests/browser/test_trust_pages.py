"""The explorer, step-by-step and comparison pages as a class would see them (issue 9).

Screenshots at desktop (1440×900) and phone (390×844) width land in
test-artifacts/trust-<page>-<width>.png for a person to look at; the checks
here are what can be read from the page: nothing clipped sideways at phone
width, a click on a head panel enlarges that head.
"""

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import assert_no_exception, settle, shot

pytestmark = pytest.mark.browser

VIEWS = {
    "explorer": "explorer?mask=causal&input=sentence",
    "steps": "steps?mask=causal",
    "compare": "compare?dropout=0.3&training=true",
}
WIDTHS = {1440: (1440, 900), 390: (390, 844)}


@pytest.mark.parametrize("width", list(WIDTHS))
@pytest.mark.parametrize("name", list(VIEWS))
def test_pages_fit_the_screen(server, new_page, name, width):
    page = new_page(WIDTHS[width])
    page.goto(f"{server.url}/{VIEWS[name]}")
    settle(page)
    expect(page.locator(".js-plotly-plot").first).to_be_visible(timeout=60_000)
    assert_no_exception(page)
    # Nothing wider than the screen: no sideways scrolling of the page itself.
    overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 1, f"{name} at {width} px is {overflow} px wider than the screen"
    shot(page, f"trust-{name}-{width}")
    tall_shot(page, f"trust-{name}-{width}-whole")


def tall_shot(page, name: str) -> None:
    """The whole page: the viewport stretched to the height of Streamlit's scrolling main area."""
    height = page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
    page.set_viewport_size({"width": page.viewport_size["width"], "height": min(int(height) + 40, 12000)})
    page.wait_for_timeout(500)  # plotly relayouts on resize
    shot(page, name)


def test_explorer_metrics_take_at_most_two_rows_on_a_phone(server, new_page):
    page = new_page(WIDTHS[390])
    page.goto(f"{server.url}/explorer")
    settle(page)
    expect(page.locator('[data-testid="stMetric"]')).to_have_count(3, timeout=60_000)
    tops = page.locator('[data-testid="stMetric"]').evaluate_all(
        "els => els.map(e => Math.round(e.getBoundingClientRect().top))"
    )
    assert len(set(tops)) <= 2, tops


def test_clicking_a_panel_enlarges_that_head(server, new_page):
    page = new_page(WIDTHS[1440])
    page.goto(f"{server.url}/explorer?mask=causal")
    settle(page)
    expect(page.locator(".js-plotly-plot").first).to_be_visible(timeout=60_000)
    box = page.evaluate(
        """() => {
            const title = [...document.querySelectorAll('.js-plotly-plot .annotation-text')]
                .find(t => t.textContent === 'head 3');
            title.scrollIntoView({block: 'center'});
            const r = title.getBoundingClientRect();
            return {x: r.x + r.width / 2, y: r.y + r.height};
        }"""
    )
    page.mouse.move(box["x"], box["y"] + 50)  # a cell of head 3's panel, under its title
    expect(page.locator(".hoverlayer .hovertext")).to_contain_text("head 3")  # plotly clicks what it hovers
    page.mouse.click(box["x"], box["y"] + 50)
    expect(page.get_by_role("combobox", name="Enlarge one head")).to_have_value("head 3", timeout=60_000)
    expect(page.locator(".js-plotly-plot")).to_have_count(3, timeout=60_000)  # grid, head 3, output
    settle(page)
    assert_no_exception(page)
    shot(page, "trust-explorer-enlarged-1440")
