"""Back, Forward and links in Chromium: widget changes replace the URL, page changes add an entry.

Issue 9 item 14: Home → Explorer → heads 8 → heads 16 → Step by step → Back ×4 never
reached Home or heads 8, and every widget change added a history entry.
"""

import re
import time
from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import assert_no_exception, painted, settle, shot

pytestmark = pytest.mark.browser
PAGE_MS = 60_000  # a page change under load (2 shared cores) takes longer than expect's 5 s default


def query(page) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(urlparse(page.url).query).items()}


def path(page) -> str:
    return urlparse(page.url).path


def wait_for_query(page, expected: dict[str, str], timeout_s: float = 60) -> None:
    """Wait until the URL's query parameters are `expected` (in any order)."""
    deadline = time.monotonic() + timeout_s
    while query(page) != expected:
        assert time.monotonic() < deadline, f"URL {page.url}, expected {expected}"
        page.wait_for_timeout(100)


def seed_input(page):
    return page.get_by_role("spinbutton", name="Seed", exact=True)


def loaded(page) -> None:
    """After a goto or reload: wait until this session's script has drawn the page and finished.

    Right after a navigation the app reads "notRunning" before its first run has even started, so
    `settle` alone can return at once; the sidebar's Seed control, enabled, shows that the run got
    to the widgets (issue 21 §5: the link test then read the page mid-run, under load).
    """
    expect(seed_input(page)).to_be_enabled(timeout=120_000)
    settle(page)


def heads_slider(page):
    return page.get_by_role("slider", name="Heads")


def test_back_and_forward_across_pages_and_widget_changes(server, new_page):
    page = new_page()
    page.goto(server.url)
    settle(page)
    start = page.evaluate("history.length")
    page.locator('[data-testid="stMain"] [data-testid="stPageLink"]').filter(
        has_text="Multi-head explorer"
    ).click()
    expect(page.locator("h1")).to_contain_text("Multi-head explorer", timeout=PAGE_MS)
    settle(page)
    assert page.evaluate("history.length") == start + 1, "a page change adds one entry"

    heads = page.get_by_role("slider", name="Heads")
    heads.focus()
    for expected in ("8", "16"):
        page.keyboard.press("ArrowRight")
        expect(page).to_have_url(f"{server.url}/explorer?n_heads={expected}", timeout=60_000)
        settle(page)
        assert_no_exception(page)
    assert page.evaluate("history.length") == start + 1, "widget changes replace the URL"

    page.locator('[data-testid="stSidebarNav"] a').filter(has_text="Step by step").click()
    expect(page.locator("h1")).to_contain_text("Step by step", timeout=PAGE_MS)
    settle(page)
    assert path(page) == "/steps" and query(page) == {"n_heads": "16"}, "the configuration follows"

    page.go_back()
    expect(page.locator("h1")).to_contain_text("Multi-head explorer", timeout=PAGE_MS)
    settle(page)
    assert query(page) == {"n_heads": "16"}
    expect(heads_slider(page)).to_have_attribute("aria-valuetext", "16", timeout=PAGE_MS)
    page.go_back()
    expect(page.locator("h1")).to_contain_text("see how attention works", timeout=PAGE_MS)
    settle(page)
    assert path(page) == "/"
    page.go_forward()
    expect(page.locator("h1")).to_contain_text("Multi-head explorer", timeout=PAGE_MS)
    settle(page)
    expect(heads_slider(page)).to_have_attribute("aria-valuetext", "16", timeout=PAGE_MS)
    page.go_forward()
    expect(page.locator("h1")).to_contain_text("Step by step", timeout=PAGE_MS)
    settle(page)
    assert_no_exception(page)


def test_back_restores_the_configuration_of_the_previous_page(server, new_page):
    page = new_page()
    page.goto(f"{server.url}/explorer?n_heads=2")
    loaded(page)
    # The link has been read (a click on the menu before that would leave the link unread).
    expect(heads_slider(page)).to_have_attribute("aria-valuetext", "2", timeout=PAGE_MS)
    page.locator('[data-testid="stSidebarNav"] a').filter(has_text="PyTorch vs TensorFlow").click()
    expect(page.locator("h1")).to_contain_text("PyTorch vs TensorFlow", timeout=PAGE_MS)
    settle(page)
    expect(heads_slider(page)).to_have_attribute("aria-valuetext", "2", timeout=PAGE_MS)
    heads_slider(page).focus()
    page.keyboard.press("ArrowRight")  # 2 → 4 on the comparison page
    expect(page).to_have_url(f"{server.url}/compare", timeout=60_000)  # 4 is the default: not written
    settle(page)
    page.go_back()
    expect(page.locator("h1")).to_contain_text("Multi-head explorer", timeout=PAGE_MS)
    settle(page)
    # the explorer comes back as it was left
    expect(heads_slider(page)).to_have_attribute("aria-valuetext", "2", timeout=PAGE_MS)
    panels = page.locator(".js-plotly-plot").first.locator(".annotation-text").filter(has_text="head ")
    expect(panels).to_have_count(2, timeout=PAGE_MS)


@pytest.mark.parametrize("name", ["explorer", "steps", "compare"])
def test_a_link_restores_every_page_and_a_change_is_written(server, new_page, name):
    page = new_page()
    page.goto(f"{server.url}/{name}?n_heads=2&mask=causal&seed=3&dtype=float64")
    loaded(page)
    assert_no_exception(page)
    assert query(page) == {"n_heads": "2", "mask": "causal", "seed": "3", "dtype": "float64"}
    expect(heads_slider(page)).to_have_attribute("aria-valuetext", "2", timeout=PAGE_MS)
    seed = seed_input(page)
    seed.fill("5")
    seed.press("Enter")
    wait_for_query(page, {"n_heads": "2", "mask": "causal", "seed": "5", "dtype": "float64"})
    settle(page)
    page.reload()
    loaded(page)
    # A value that stays wrong fails here (the link restored a default); one read mid-run does not.
    expect(seed_input(page)).to_have_value("5", timeout=30_000)
    expect(heads_slider(page)).to_have_attribute("aria-valuetext", "2", timeout=PAGE_MS)


def test_timing_choices_are_kept_in_the_link(server, new_page):
    page = new_page()
    page.goto(f"{server.url}/timing?timing.heads=4")
    settle(page)
    expect(page.get_by_role("combobox", name="Heads")).to_have_value("4")
    page.get_by_role("combobox", name="Batch").click()
    page.get_by_role("option", name="2", exact=True).click()
    page.get_by_role("button", name="Run benchmark").click()
    wait_for_query(page, {"timing.heads": "4", "timing.batch": "2"})


@pytest.mark.parametrize("size", [(1440, 900), (390, 844)], ids=["desktop", "phone"])
# The explorer at both widths: tests/browser/test_trust_pages.py (its layout checked, its shots taken).
@pytest.mark.parametrize("name", ["home", "timing"])
def test_screenshots(server, new_page, name, size):
    page = new_page(viewport=size)
    page.goto(f"{server.url}/{'' if name == 'home' else name}")
    settle(page)
    if name == "home":  # lazily drawn parts: the diagram, the formula, the links
        expect(page.locator('[data-testid="stImage"] img').last).to_be_visible()
        assert_diagram_text_is_readable(page)
        expect(page.locator(".katex").first).to_be_visible()
        expect(page.locator('[data-testid="stMain"] [data-testid="stPageLink"]').last).to_contain_text(
            "Timing"
        )
    else:
        expect(page.get_by_role("button", name="Run benchmark")).to_be_visible()
    painted(page)
    assert_no_exception(page)
    shot(page, f"{name}-{size[0]}x{size[1]}")


SMALLEST_READABLE_PX = 10.5  # CSS pixels: the smallest label of the pipeline diagram on screen


def assert_diagram_text_is_readable(page) -> None:
    """Issue 21 §4: at 390 px the 900-wide diagram's labels were ~5 px. Each diagram image's
    smallest font, scaled by its drawn width over its viewBox width, must stay readable."""
    images = page.locator('[data-testid="stMain"] [data-testid="stImage"] img').all()
    assert images
    for img in images:
        svg = page.evaluate("async (src) => await (await fetch(src)).text()", img.get_attribute("src"))
        view_width = float(re.search(r'viewBox="[\d.]+ [\d.]+ ([\d.]+)', svg).group(1))
        smallest = min(float(v) for v in re.findall(r"font-size:\s*([\d.]+)px", svg))
        drawn = img.bounding_box()["width"]
        shown = smallest * drawn / view_width
        assert shown >= SMALLEST_READABLE_PX, f"{shown:.1f} px labels ({drawn:.0f} px wide image)"
