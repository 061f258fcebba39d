"""Browser fixtures: a live `streamlit run app.py` and headless Chromium (helpers in tests/live.py).

Without Chromium these tests skip with a message, except where
ATTNVIZ_REQUIRE_BROWSER=1 or CI=true (.ci/run), where a missing browser fails.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.live import (  # noqa: F401 — re-exported for the browser tests
    ARTIFACTS,
    CHROMIUM,
    CHROMIUM_ARGS,
    ROOT,
    SETTLE_MS,
    WAIT_MS,
    Server,
    click_and_settle,
    free_port,
    launch_chromium,
    new_context,
    painted,
    settle,
)

REQUIRED = os.environ.get("ATTNVIZ_REQUIRE_BROWSER") == "1" or os.environ.get("CI", "").lower() == "true"


def _missing() -> str | None:
    if not Path(CHROMIUM).exists():
        return f"Chromium not found at {CHROMIUM} (apt-get install -y chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[dev]')"
    return None


@pytest.fixture(scope="session", autouse=True)
def _browser_available():
    reason = _missing()
    if reason:
        if REQUIRED:
            pytest.fail(f"browser tests are mandatory here: {reason}")
        pytest.skip(reason)


@pytest.fixture(scope="session")
def server():
    srv = Server()
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=WAIT_MS)  # every `expect` waits for its condition up to a minute

    with sync_playwright() as p:
        b = launch_chromium(p)
        yield b
        b.close()


@pytest.fixture
def new_page(browser):
    contexts = []

    def make(viewport=(1400, 1000)):
        ctx = new_context(browser, viewport)
        contexts.append(ctx)
        return ctx.new_page()

    yield make
    for ctx in contexts:
        ctx.close()


def assert_no_exception(page) -> None:
    errors = page.locator('[data-testid="stException"]')
    assert errors.count() == 0, errors.first.inner_text()


def shot(page, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
