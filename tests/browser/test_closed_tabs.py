"""Work does not outlive its tab (issue 26 §2), against a live server and SmolLM2-135M.

For each long computation — the logit lens, the head-role scan, "From toy to real", the patching
sweep, head importance and a training — a tab starts it, the server is seen computing, the tab
closes (while its spinner or progress bar shows), and the server's CPU goes back to idle and its
memory back near where it was. Seconds from the close to idle (and whether the server's log says the
run stopped because its session ended) go to
test-artifacts/closed-tabs.json (the target is 3 s; the wait itself is a condition with a limit).
"""

from __future__ import annotations

import json
import time
from urllib.parse import quote

import pytest
from playwright.sync_api import expect

from attnviz.cache import MIB
from tests.browser.test_training_limits import HEAVY, cores_busy, rss_back
from tests.live import ARTIFACTS, Server, settle

pytestmark = pytest.mark.browser
SMOL = "interp.checkpoint=SmolLM2-135M-Instruct"
LENS_TEXT = "The Eiffel Tower is in the city of Paris, and " * 16  # ~180 tokens: within the lens's budget
IMPORTANCE_TEXT = "The Eiffel Tower is in the city of Paris, and the river is the Seine."
# door → (link, the button that starts it or None when opening the link starts it, the text the page
# shows while it computes, what the server's log says when it stops)
STOPPED, ENDED = "(session ended)", "ended early (session ended)"
DOORS = {
    "logit lens": (f"interpret?{SMOL}&interp.tab=Logit+lens&interp.text={quote(LENS_TEXT)}", None, "Reading every layer", STOPPED),
    "role scan": (f"interpret?{SMOL}&interp.tab=Head+roles&interp.half=64&interp.n=8&interp.seed=11", None, "Scanning every head", STOPPED),
    "toy to real": (f"interpret?{SMOL}&interp.tab=From+toy+to+real&interp.half=64&interp.n=8&interp.seed=12", None, "Ablating the top induction heads", STOPPED),
    "patching sweep": (f"interpret?{SMOL}&interp.tab=Patching", "Run the patching sweep", "Head ", STOPPED),
    "head importance": (
        f"pretrained?pre.checkpoint=SmolLM2-135M-Instruct&pre.tab=Ablation&pre.text={quote(IMPORTANCE_TEXT)}",
        "Most important heads", "Ablated ", STOPPED,
    ),
    "training": (f"training?{HEAVY}", "Start", "training", ENDED),
}  # fmt: skip
IDLE = 0.2  # cores: back to idle
LIMIT_S = 60  # how long a condition may take before the test fails


def wait_for(condition, limit_s: float = LIMIT_S) -> float:
    """Seconds until `condition()` holds (polled; each poll measures for a while), or fail at the limit."""
    began = time.monotonic()
    while not condition():
        assert time.monotonic() - began < limit_s, "condition not met in time"
    return time.monotonic() - began


@pytest.mark.timeout(1500)
def test_every_long_computation_stops_when_its_tab_closes(new_page):
    srv = Server()
    figures: dict = {}
    try:
        warm = new_page((1400, 1000))  # load SmolLM2 and both pages' imports once: the baseline includes them
        for link in (
            f"interpret?{SMOL}&interp.half=2&interp.n=1",
            "pretrained?pre.checkpoint=SmolLM2-135M-Instruct",
        ):
            warm.goto(f"{srv.url}/{link}", timeout=600_000)
            settle(warm, 600_000)  # the first run converts SmolLM2 and imports both frameworks
        warm.context.close()
        wait_for(lambda: cores_busy(srv.proc.pid, 0.5) < IDLE)
        baseline = srv.rss() / MIB
        figures["baseline_rss_mib"] = baseline
        for door, (link, button, computing, said) in DOORS.items():
            logged = srv.log.read_text().count(said)
            page = new_page((1400, 1000))
            page.goto(f"{srv.url}/{link}", timeout=300_000)
            if button:
                settle(page, 300_000)
                main = page.locator('[data-testid="stMain"]')
                main.get_by_role("button", name=button, exact=True).first.click()
            # Computing: its spinner or progress bar shows (CPU readings are no sign on a loaded machine).
            busy = page.locator('[data-testid="stSpinner"], [data-testid="stProgress"]', has_text=computing)
            expect(busy.first).to_be_visible(timeout=300_000)
            page.context.close()
            closed = time.monotonic()
            wait_for(lambda: cores_busy(srv.proc.pid, 0.5) < IDLE)
            idle = time.monotonic() - closed
            rss = rss_back(srv, baseline + 150, timeout_s=LIMIT_S) / MIB
            # Whether our check stopped it (Streamlit may stop a closed tab's run itself first).
            logged = srv.log.read_text().count(said) > logged
            figures[door] = {"idle_after_close_s": idle, "rss_mib": rss, "stop_logged": logged}
            assert rss < baseline + 150, (door, figures)
    finally:
        srv.stop()
        ARTIFACTS.mkdir(exist_ok=True)
        (ARTIFACTS / "closed-tabs.json").write_text(json.dumps(figures, indent=2))
    assert set(DOORS) <= set(figures), figures
