"""Issue 20 §1 against a live server: training tabs cannot take the server.

- A tab with a running training closes: the run ends within seconds, the server's CPU
  goes back to idle and its memory back near the baseline.
- Three tabs start at once on a server that allows two: the third gets the limit message.
- The issue's hostile configuration is refused in the sidebar before anything starts.
Figures (CPU, RSS, another visitor's page time) go to test-artifacts/training-limits.json.
"""

import json
import os
import time
from pathlib import Path

import pytest
from playwright.sync_api import expect

from attnviz.cache import MIB
from tests.live import ARTIFACTS, Server, settle

pytestmark = pytest.mark.browser
TICK = os.sysconf("SC_CLK_TCK")
# Long enough to outlive the test, within the default budgets (parameters × batch × sequence 4.3e8).
HEAVY = (
    "training.task=copy&training.seq_len=32&training.vocab=64&training.n_layers=2&training.n_heads=4"
    "&training.d_model=128&training.mlp=true&training.batch=32&training.steps=5000"
    "&training.snapshot_every=250&training.framework=PyTorch"
)
HOSTILE = (
    "training.task=copy&training.seq_len=64&training.vocab=256&training.n_layers=4&training.n_heads=8"
    "&training.d_model=256&training.mlp=true&training.batch=256&training.steps=5000&training.snapshot_every=250"
)
TINY = "training.steps=20&training.snapshot_every=10&training.d_model=16&training.framework=PyTorch"


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def cores_busy(pid: int, over_s: float = 2.0) -> float:
    before = cpu_seconds(pid)
    time.sleep(over_s)
    return (cpu_seconds(pid) - before) / over_s


def open_training(new_page, srv, query):
    page = new_page((1400, 1000))
    page.goto(f"{srv.url}/training?{query}", timeout=300_000)
    settle(page, 300_000)
    return page


def start(page):
    page.locator('[data-testid="stMain"]').get_by_role("button", name="Start", exact=True).click()


def wait_idle(pid: int, timeout_s: float) -> tuple[float, float]:
    """Seconds until the server uses under a fifth of a core, and the last reading."""
    started = time.monotonic()
    busy = cores_busy(pid, 1.0)
    while busy > 0.2 and time.monotonic() - started < timeout_s:
        busy = cores_busy(pid, 1.0)
    return time.monotonic() - started, busy


def rss_back(srv, bound_mib: float, timeout_s: float) -> int:
    """The server's RSS once it is under `bound_mib` (the runs' memory handed back), or at the deadline."""
    deadline = time.monotonic() + timeout_s
    while (rss := srv.rss()) >= bound_mib * MIB and time.monotonic() < deadline:
        time.sleep(0.2)  # polling interval; the condition ends the wait
    return rss


def explorer_seconds(new_page, srv) -> float:
    page = new_page((1400, 1000))
    began = time.perf_counter()
    page.goto(f"{srv.url}/explorer?seed=7", timeout=300_000)
    settle(page, 300_000)
    page.locator(".js-plotly-plot").first.wait_for(state="visible", timeout=300_000)
    took = time.perf_counter() - began
    page.context.close()
    return took


@pytest.mark.timeout(1500)
def test_closed_tabs_end_their_training_and_a_third_start_gets_the_limit(new_page):
    # Four run slots: trainings may hold three (never the last), so the third start meets the
    # training limit itself (ATTNVIZ_TRAIN_MAX_RUNS=2), not the slots.
    srv = Server(env={"ATTNVIZ_TRAIN_MAX_RUNS": "2", "ATTNVIZ_MAX_CONCURRENT_RUNS": "4"})
    figures = {}
    try:
        warm = open_training(new_page, srv, TINY)  # import PyTorch once: the baseline includes it
        start(warm)
        expect(warm.locator('[data-testid="stProgress"]').first).to_contain_text("finished", timeout=120_000)
        warm.context.close()
        explorer_seconds(new_page, srv)  # the explorer's first open (imports) is not the figure below
        wait_idle(srv.proc.pid, 30)
        figures["baseline_rss_mib"] = srv.rss() / MIB
        figures["explorer_idle_s"] = explorer_seconds(new_page, srv)

        hostile = open_training(new_page, srv, HOSTILE)  # refused before Start is possible
        assert "a batch of at most" in hostile.locator('[data-testid="stSidebar"]').inner_text()
        expect(hostile.locator('[data-testid="stMain"] button', has_text="Start").first).to_be_disabled()
        hostile.context.close()

        tabs = [open_training(new_page, srv, HEAVY) for _ in range(3)]
        for tab in tabs[:2]:
            start(tab)
            expect(tab.locator('[data-testid="stProgress"]').first).to_contain_text(
                "training", timeout=120_000
            )
        start(tabs[2])
        expect(tabs[2].get_by_text("ATTNVIZ_TRAIN_MAX_RUNS=2")).to_be_visible(timeout=60_000)
        figures["busy_cores_two_runs"] = cores_busy(srv.proc.pid)
        figures["rss_two_runs_mib"] = srv.rss() / MIB
        figures["explorer_two_runs_s"] = explorer_seconds(new_page, srv)

        for tab in tabs:
            tab.context.close()
        closed = time.monotonic()
        ended = "ended early (session ended)"
        while srv.log.read_text().count(ended) < 2 and time.monotonic() - closed < 60:
            time.sleep(0.1)
        figures["runs_ended_after_close_s"] = time.monotonic() - closed
        figures["runs_ended"] = srv.log.read_text().count(ended)
        figures["idle_after_close_s"], figures["busy_cores_after_close"] = wait_idle(srv.proc.pid, 60)
        figures["rss_after_close_mib"] = rss_back(srv, figures["baseline_rss_mib"] + 150, timeout_s=30) / MIB
        figures["explorer_after_close_s"] = explorer_seconds(new_page, srv)
        figures["seconds_since_close"] = time.monotonic() - closed
    finally:
        srv.stop()
        ARTIFACTS.mkdir(exist_ok=True)
        (ARTIFACTS / "training-limits.json").write_text(json.dumps(figures, indent=2))
    assert figures["runs_ended"] == 2 and figures["runs_ended_after_close_s"] < 15, (
        figures
    )  # ended with their tabs
    # The CPU figures are recorded, not asserted: on a loaded machine a training server gets a
    # fraction of a core, so "busy" and "idle" readings overlap; the log says when each run ended.
    assert figures["busy_cores_after_close"] < 0.5, figures
    assert figures["rss_after_close_mib"] < figures["baseline_rss_mib"] + 150, figures
