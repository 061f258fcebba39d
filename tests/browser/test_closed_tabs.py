"""Work does not outlive its tab (issue 26 §2, issue 28 §1), against a live server and SmolLM2-135M.

Every long computation runs as a task in a worker process. For each door — the logit lens, the
head-role scan, "From toy to real", the patching sweep, head importance, a training, a Timing sweep
and the tiles page's replay — a tab starts it, its progress bar shows, the tab closes, and the task
must end within 5 s (the worker's threads all asleep, waiting for the next task, read from /proc:
a worker starved of CPU by a loaded machine stays runnable while it computes) and the worker's
memory must come back near what it held before (SmolLM2 stays loaded in it: its checkpoint cache).

One server with one worker (`ATTNVIZ_MAX_CONCURRENT_RUNS=1`), so every task runs in the worker
measured; each door's input is new to it (no cached result). A task inside a step it cannot leave
(a model's forward pass on a loaded machine) is ended with its worker after the grace period, which
also hands its memory back; the next door then reloads SmolLM2 first. Seconds from the close to the task's
end and the worker's RSS go to test-artifacts/closed-tabs.json.
"""

from __future__ import annotations

import json
import time
from urllib.parse import quote

import pytest

from tests.browser.workers import idle_since, rss_mib, seconds_until, wait_workers, workers
from tests.live import ARTIFACTS, Server, settle

pytestmark = pytest.mark.browser
SMOL = "interp.checkpoint=SmolLM2-135M-Instruct"
LENS_TEXT = "The Eiffel Tower is in the city of Paris, and " * 16  # ~180 tokens: within the lens's budget
IMPORTANCE_TEXT = "The Eiffel Tower is in the city of Paris, and the river is the Seine."
TILES_TEXT = (
    "The cat sat on the mat because it was tired, and then the dog came in and the cat ran. " * 5
)  # 111 tokens: 28 × 28 tiles
TRAINING = (
    "training?training.task=copy&training.seq_len=32&training.vocab=64&training.n_layers=2"
    "&training.n_heads=4&training.d_model=128&training.mlp=true&training.batch=32&training.steps=5000"
    "&training.snapshot_every=50&training.framework=PyTorch"
)
# door → (link, the button that starts it or None when opening the link starts it, the progress text)
DOORS = {
    "logit lens": (f"interpret?{SMOL}&interp.tab=Logit+lens&interp.text={quote(LENS_TEXT)}", None, "Reading every layer"),
    "role scan": (f"interpret?{SMOL}&interp.tab=Head+roles&interp.half=64&interp.n=8&interp.seed=11", None, "Scanning every head"),
    "toy to real": (f"interpret?{SMOL}&interp.tab=From+toy+to+real&interp.half=64&interp.n=8&interp.seed=12", None, "Ablating the top induction heads"),
    "patching sweep": (f"interpret?{SMOL}&interp.tab=Patching", "Run the patching sweep", "Patching each head"),
    "head importance": (
        f"pretrained?pre.checkpoint=SmolLM2-135M-Instruct&pre.tab=Ablation&pre.text={quote(IMPORTANCE_TEXT)}",
        "Most important heads", "Ablating each head",
    ),
    "training": (TRAINING, "Start", "training ·"),
    "timing sweep": ("timing?timing.impls=attnviz-torch&timing.lengths=1024&timing.repeats=50", "Run benchmark", "Measuring"),
    "tiles replay": (f"tiles?tiles.text={quote(TILES_TEXT)}&tiles.bq=4&tiles.bk=4&tiles.layer=5", None, "Replaying the head"),
}  # fmt: skip
# Every progress bar's text the page ever draws, recorded as it is drawn.
SEEN_JS = """
window.__progress = [];
new MutationObserver(() => {
  for (const bar of document.querySelectorAll('[data-testid="stProgress"]')) {
    const text = bar.innerText.trim();
    if (text && !window.__progress.includes(text)) window.__progress.push(text);
  }
}).observe(document, {subtree: true, childList: true, characterData: true});
"""
STOP_S = 5.0  # the bound: a closed tab's task ends within this
RSS_SLACK_MIB = 100  # what a worker may keep after a task beyond its idle resident set
WARM = f"interpret?{SMOL}&interp.tab=Logit+lens&interp.text=Hello+"  # + a number: never a cached lens
SMOL_LOADED_MIB = 500  # a worker holding SmolLM2 (about 0.7 GiB resident; without it about 0.2)


def warm_worker(new_page, srv) -> int:
    """The server's worker, holding SmolLM2 (loaded by a tiny lens when it does not yet: a worker
    that had to be killed comes back without it) and idle: the baseline every door is measured against."""
    found = workers(srv.proc.pid)  # none before the first page: the server starts them then
    if not found or rss_mib(found[0]) < SMOL_LOADED_MIB:
        page = new_page((1400, 1000))
        page.goto(f"{srv.url}/{WARM}{time.monotonic_ns()}", timeout=600_000)
        settle(page, 600_000)
        page.context.close()
    (worker,) = wait_workers(srv.proc.pid, 1)
    idle_since(worker)
    return worker


@pytest.mark.timeout(1500)
def test_every_long_computation_stops_when_its_tab_closes(new_page):
    srv = Server(env={"ATTNVIZ_MAX_CONCURRENT_RUNS": "1"})
    figures: dict = {}
    try:
        for door, (link, button, computing) in DOORS.items():
            worker = warm_worker(new_page, srv)
            baseline = rss_mib(worker)
            page = new_page((1400, 1000))
            page.add_init_script(SEEN_JS)
            page.goto(f"{srv.url}/{link}", timeout=300_000)
            if button:
                settle(page, 300_000)
                page.locator('[data-testid="stMain"]').get_by_role("button", name=button).first.click()
            # Its progress bar drawn (seen by the observer, however briefly it stood: a quiet machine
            # may finish a short replay between two polls of a locator).
            page.wait_for_function(
                f"() => window.__progress.some(t => t.includes({json.dumps(computing)}))", timeout=300_000
            )
            page.context.close()
            closed = time.monotonic()
            ended = idle_since(worker) - closed
            (after,) = wait_workers(srv.proc.pid, 1)  # the same worker, unless it had to be killed
            bound = baseline + RSS_SLACK_MIB
            back = seconds_until(lambda w=after, b=bound: rss_mib(w) < b, 60, f"{door}: memory back")
            figures[door] = {
                "task_ended_after_close_s": round(ended, 2),
                "worker_rss_before_mib": round(baseline),
                "worker_rss_after_mib": round(rss_mib(after)),
                "memory_back_s": round(back, 2),
                "worker_replaced": after != worker,
            }
    finally:
        srv.stop()
        ARTIFACTS.mkdir(exist_ok=True)
        (ARTIFACTS / "closed-tabs.json").write_text(json.dumps(figures, indent=2))
    assert set(figures) == set(DOORS), figures
    late = {door: f for door, f in figures.items() if f["task_ended_after_close_s"] > STOP_S}
    assert not late, late
