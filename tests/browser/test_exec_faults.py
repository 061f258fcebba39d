"""The execution layer's faults on a live server (issue 28 §1), each test with its own server.

- A worker killed from outside (`kill -9`) under a visitor's training: the visitor reads "the worker
  stopped (signal 9, SIGKILL)" with a Run again button; the server keeps serving another visitor's
  explorer meanwhile; Run again trains on a new worker.
- A task over its time limit (`ATTNVIZ_RUN_MAX_SECONDS`): a Timing sweep ends with the limit named.
- A task over its memory budget (`ATTNVIZ_RUN_MB`): a training fails with the budget named, its
  worker lives on, and the server still serves pages.

Figures go to test-artifacts/exec-faults.json. Closed tabs: tests/browser/test_closed_tabs.py.
"""

from __future__ import annotations

import json
import os
import re
import signal

import pytest
from playwright.sync_api import expect

from tests.browser.workers import seconds_until, wait_workers, workers
from tests.live import ARTIFACTS, Server, settle

pytestmark = pytest.mark.browser
WAIT_MS = 180_000
# Long enough to be killed or stopped mid-run (5,000 steps), small enough to start at once.
TRAINING = (
    "training?training.task=copy&training.seq_len=32&training.vocab=64&training.n_layers=2"
    "&training.n_heads=4&training.d_model=128&training.mlp=true&training.batch=32&training.steps=5000"
    "&training.snapshot_every=50&training.framework=PyTorch"
)
FIGURES: dict = {}


def open_page(new_page, srv: Server, link: str):
    page = new_page((1400, 1000))
    page.goto(f"{srv.url}/{link}", timeout=WAIT_MS)
    settle(page, WAIT_MS)
    return page


def press(page, name: str) -> None:
    page.locator('[data-testid="stMain"]').get_by_role("button", name=name, exact=True).first.click()


def training_progress(page):
    return page.locator('[data-testid="stProgress"]').first


def explorer_draws(new_page, srv: Server) -> None:
    """Another visitor's explorer draws its heatmap (the server serves pages)."""
    page = open_page(new_page, srv, "explorer?seed=5")
    expect(page.locator(".js-plotly-plot").first).to_be_visible(timeout=WAIT_MS)
    assert page.locator('[data-testid="stException"]').count() == 0
    page.context.close()


@pytest.fixture(scope="module", autouse=True)
def _write_figures():
    yield
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "exec-faults.json").write_text(json.dumps(FIGURES, indent=2))


@pytest.mark.timeout(900)
def test_a_killed_worker_is_said_and_run_again_works_while_the_server_serves(new_page):
    srv = Server(env={"ATTNVIZ_MAX_CONCURRENT_RUNS": "1"})  # one worker: the one that runs the training
    try:
        page = open_page(new_page, srv, TRAINING)
        press(page, "Start")
        expect(training_progress(page)).to_contain_text("training ·", timeout=WAIT_MS)
        (victim,) = wait_workers(srv.proc.pid, 1)
        os.kill(victim, signal.SIGKILL)
        expect(page.get_by_text("the worker stopped (signal 9, SIGKILL)")).to_be_visible(timeout=WAIT_MS)
        again = page.locator('[data-testid="stMain"]').get_by_role("button", name="Run again")
        expect(again).to_be_visible()
        explorer_draws(new_page, srv)  # the server kept serving
        again.click()
        expect(training_progress(page)).to_contain_text("training ·", timeout=WAIT_MS)
        (replacement,) = wait_workers(srv.proc.pid, 1)
        assert replacement != victim
        expect(training_progress(page)).to_contain_text(re.compile(r"step [1-9]\d{2,} of"), timeout=WAIT_MS)
        press(page, "Stop")
        expect(training_progress(page)).to_contain_text("stopped", timeout=WAIT_MS)
        assert page.locator('[data-testid="stException"]').count() == 0
        FIGURES["killed"] = {"victim": victim, "replacement": replacement}
    finally:
        srv.stop()


@pytest.mark.timeout(600)
def test_a_task_over_its_time_limit_ends_with_the_limit_named(new_page):
    srv = Server(env={"ATTNVIZ_MAX_CONCURRENT_RUNS": "1", "ATTNVIZ_RUN_MAX_SECONDS": "2"})
    try:
        # 16 heads at 512 and 1,024 tokens, 50 repeats each, and the matmul ceiling: well over 10 s
        # on a quiet 2-core machine (a smaller sweep once finished inside a limit of 8 s).
        page = open_page(
            new_page,
            srv,
            "timing?timing.impls=attnviz-torch&timing.lengths=512&timing.lengths=1024&timing.heads=16"
            "&timing.repeats=50",
        )
        press(page, "Run benchmark")
        limit = page.get_by_text("over the time limit of 2 s")
        expect(limit).to_be_visible(timeout=WAIT_MS)
        assert "ATTNVIZ_RUN_MAX_SECONDS" in page.locator('[data-testid="stAlert"]').first.inner_text()
        assert page.locator('[data-testid="stException"]').count() == 0
        FIGURES["time limit"] = "said"
    finally:
        srv.stop()


@pytest.mark.timeout(600)
def test_a_task_over_its_memory_budget_ends_with_the_budget_named_and_its_worker_lives(new_page):
    srv = Server(env={"ATTNVIZ_MAX_CONCURRENT_RUNS": "1", "ATTNVIZ_RUN_MB": "24"})
    try:
        # A training whose first steps need more than 24 MiB (its estimate is within the training
        # budget, so only the worker's own limit can stop it).
        page = open_page(new_page, srv, TRAINING)
        (worker,) = wait_workers(srv.proc.pid, 1)
        press(page, "Start")
        said = page.get_by_text("more than the memory budget of 24 MiB per run")
        expect(said).to_be_visible(timeout=WAIT_MS)
        assert workers(srv.proc.pid) == [worker], (
            "the worker lives on: the allocation failed, not the process"
        )
        assert page.locator('[data-testid="stException"]').count() == 0
        FIGURES["memory budget"] = "said"
        explorer_draws(new_page, srv)  # the server stays up
        seconds_until(lambda: srv.proc.poll() is None, 1)
    finally:
        srv.stop()
