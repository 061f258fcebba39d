"""A live `streamlit run app.py` on a free localhost port, and headless Chromium to drive it.

Modelled on Streamlit's own e2e suite: headless server, poll `/_stcore/health`,
wait for `data-test-script-state="notRunning"`, locate by `data-testid`.
Without Chromium these tests skip with a message, except where
ATTNVIZ_REQUIRE_BROWSER=1 or CI=true (.ci/run), where a missing browser fails.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = os.environ.get("ATTNVIZ_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
REQUIRED = os.environ.get("ATTNVIZ_REQUIRE_BROWSER") == "1" or os.environ.get("CI", "").lower() == "true"
SETTLE_MS = 120_000


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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`streamlit run app.py`, headless, on 127.0.0.1; stopped by `stop()`."""

    def __init__(self):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = ARTIFACTS / f"server-{self.port}.log"
        ARTIFACTS.mkdir(exist_ok=True)
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "streamlit",
                "run",
                str(ROOT / "app.py"),
                "--server.headless=true",
                f"--server.port={self.port}",
                "--server.address=127.0.0.1",
                "--browser.gatherUsageStats=false",
                "--server.fileWatcherType=none",
            ],
            cwd=ROOT,
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"streamlit exited early; see {self.log}")
            try:
                with urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"streamlit did not become healthy in 60 s; see {self.log}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="session")
def server():
    srv = Server()
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def new_page(browser):
    contexts = []

    def make(viewport=(1400, 1000)):
        ctx = browser.new_context(viewport={"width": viewport[0], "height": viewport[1]})
        contexts.append(ctx)
        return ctx.new_page()

    yield make
    for ctx in contexts:
        ctx.close()


def settle(page) -> None:
    """Wait until the script has finished and nothing is stale."""
    page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=SETTLE_MS)
    page.wait_for_function("() => !document.querySelector('[data-stale=\"true\"]')", timeout=SETTLE_MS)


def assert_no_exception(page) -> None:
    errors = page.locator('[data-testid="stException"]')
    assert errors.count() == 0, errors.first.inner_text()


def shot(page, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
