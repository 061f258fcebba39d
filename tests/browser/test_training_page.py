"""The Training lab in headless Chromium: it trains live (in a worker process), the view updates while
it does, Stop keeps the run.

Screenshots: test-artifacts/training-live.png (mid-run) and training-stopped.png (the timeline view).
"""

import re
import time

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import assert_no_exception, settle, shot

pytestmark = pytest.mark.browser
LIVE_TIMEOUT = 120_000


def step_shown(progress) -> int:
    return int(re.search(r"step (\d+) of", progress.inner_text()).group(1))


def test_training_lab_updates_live_and_stop_keeps_the_run(server, new_page):
    page = new_page((1400, 1600))
    page.goto(
        f"{server.url}/training?training.task=reverse&training.steps=5000&training.snapshot_every=50"
        "&training.framework=PyTorch"
    )
    settle(page)
    assert_no_exception(page)
    entries = page.evaluate("history.length")
    seed = page.get_by_role("spinbutton", name="Training seed")
    seed.fill("3")
    seed.press("Enter")
    page.wait_for_url(re.compile(r"training.seed=3"))
    settle(page)
    assert page.evaluate("history.length") == entries  # a change replaces the URL, adds no history entry
    main = page.locator('[data-testid="stMain"]')
    main.get_by_role("button", name="Start", exact=True).click()
    progress = page.locator('[data-testid="stProgress"]').first
    expect(progress).to_contain_text("training", timeout=LIVE_TIMEOUT)
    expect(page.locator(".js-plotly-plot").first).to_be_visible(timeout=LIVE_TIMEOUT)
    first = step_shown(progress)
    deadline = time.monotonic() + LIVE_TIMEOUT / 1000
    while step_shown(progress) <= first + 50 and time.monotonic() < deadline:
        page.wait_for_timeout(250)  # the view updates on its own, without a click
    assert step_shown(progress) > first + 50, "the progress did not advance by itself"
    assert (
        page.locator('[data-testid="stPlotlyChart"]').count() >= 2
    )  # curves, heatmaps (scores: the timeline's)
    expect(
        main.get_by_text("The figures show the latest snapshot, redrawn every")
    ).to_be_visible()  # they lag
    assert_no_exception(page)
    shot(page, "training-live")
    main.get_by_role("button", name="Stop", exact=True).click()
    expect(progress).to_contain_text("stopped", timeout=LIVE_TIMEOUT)
    settle(page)
    assert_no_exception(page)
    expect(page.get_by_text("Timeline: snapshot at step")).to_be_visible()
    expect(main.get_by_text("The figures show the latest snapshot")).to_have_count(0)  # only while live
    assert page.locator('[data-testid="stPlotlyChart"]').count() >= 3  # curves, heatmaps, scores
    stopped_at = step_shown(page.locator('[data-testid="stProgress"]').first)
    assert 0 < stopped_at < 5000
    assert "training.steps=5000" in page.url and "training.seed=3" in page.url
    shot(page, "training-stopped")
