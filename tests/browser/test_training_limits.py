"""Issue 20 §1 against a live server: training tabs cannot take the server (trainings in worker
processes since issue 28).

- The issue's hostile configuration is refused in the sidebar before anything starts.
- Three tabs start at once on a server that trains two at a time (3 workers, `ATTNVIZ_TRAIN_MAX_RUNS`
  2): the third gets the limit message, nothing queued.
- The tabs close: both trainings end within 5 s (their workers' threads all asleep, read from
  /proc, or the worker ended when a training could not stop within the grace period) and the
  workers' memory comes back.
Figures (the end after the close, workers' RSS, another visitor's explorer time idle and while two
train) go to test-artifacts/training-limits.json; benchmarks/training_page.py measures the bystander.
"""

import json
import time

import pytest
from playwright.sync_api import expect

from tests.browser.workers import idle_since, rss_mib, wait_workers
from tests.live import ARTIFACTS, Server, settle

pytestmark = pytest.mark.browser
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
STOP_S = 5.0
RSS_SLACK_MIB = 100


def open_training(new_page, srv, query):
    page = new_page((1400, 1000))
    page.goto(f"{srv.url}/training?{query}", timeout=300_000)
    settle(page, 300_000)
    return page


def start(page):
    page.locator('[data-testid="stMain"]').get_by_role("button", name="Start", exact=True).click()


def explorer_seconds(new_page, srv, seed: int) -> float:
    page = new_page((1400, 1000))
    began = time.perf_counter()
    page.goto(f"{srv.url}/explorer?seed={seed}", timeout=300_000)
    settle(page, 300_000)
    page.locator(".js-plotly-plot").first.wait_for(state="visible", timeout=300_000)
    took = time.perf_counter() - began
    page.context.close()
    return took


@pytest.mark.timeout(1200)
def test_a_third_training_gets_the_limit_and_closed_tabs_end_theirs(new_page):
    srv = Server(env={"ATTNVIZ_MAX_CONCURRENT_RUNS": "3", "ATTNVIZ_TRAIN_MAX_RUNS": "2"})
    figures = {}
    try:
        explorer_seconds(new_page, srv, 1)  # the explorer's first open (imports) is not the figure below
        figures["explorer_idle_s"] = explorer_seconds(new_page, srv, 2)
        pids = wait_workers(srv.proc.pid, 3)  # warmed at the first page: PyTorch imported in each
        for pid in pids:
            idle_since(pid)
        figures["worker_rss_idle_mib"] = {pid: round(rss_mib(pid)) for pid in pids}

        hostile = open_training(new_page, srv, HOSTILE)  # refused before Start is possible
        assert "a batch of at most" in hostile.locator('[data-testid="stSidebar"]').inner_text()
        expect(hostile.locator('[data-testid="stMain"] button', has_text="Start").first).to_be_disabled()
        hostile.context.close()

        tabs = [open_training(new_page, srv, HEAVY) for _ in range(3)]
        for tab in tabs[:2]:
            start(tab)
            expect(tab.locator('[data-testid="stProgress"]').first).to_contain_text(
                "training ·", timeout=120_000
            )
        start(tabs[2])
        expect(tabs[2].get_by_text("ATTNVIZ_TRAIN_MAX_RUNS")).to_be_visible(timeout=60_000)
        assert tabs[2].locator('[data-testid="stProgress"]').count() == 0  # nothing started, nothing queued
        figures["explorer_two_runs_s"] = explorer_seconds(new_page, srv, 3)
        figures["worker_rss_training_mib"] = {pid: round(rss_mib(pid)) for pid in pids}

        for tab in tabs:
            tab.context.close()
        closed = time.monotonic()
        figures["ended_after_close_s"] = {pid: round(idle_since(pid) - closed, 2) for pid in pids}
        # A training inside a step it cannot leave (its snapshot's scores, on a loaded machine) is
        # ended with its worker after the grace period: that hands its memory back too.
        figures["workers_replaced"] = sorted(set(pids) - set(wait_workers(srv.proc.pid, 3)))
        deadline = time.monotonic() + 60
        while any(rss_mib(p) >= figures["worker_rss_idle_mib"][p] + RSS_SLACK_MIB for p in pids):
            assert time.monotonic() < deadline, "the workers' memory did not come back"
            time.sleep(0.2)  # polling interval; the condition ends the wait
        figures["worker_rss_after_mib"] = {pid: round(rss_mib(pid)) for pid in pids}
    finally:
        srv.stop()
        ARTIFACTS.mkdir(exist_ok=True)
        (ARTIFACTS / "training-limits.json").write_text(json.dumps(figures, indent=2))
    assert max(figures["ended_after_close_s"].values()) < STOP_S, figures
