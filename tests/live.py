"""A live `streamlit run` server and headless Chromium: the one place tests and benchmarks get them.

Modelled on Streamlit's own e2e suite: headless server on a free 127.0.0.1
port, poll `/_stcore/health`, wait for `data-test-script-state="notRunning"`,
locate by `data-testid`. Used by tests/browser (through its conftest's
fixtures) and by benchmarks/ (directly: a benchmark never imports a conftest).
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).parents[1]
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
SETTLE_MS = 120_000
# How long a wait for a condition may take before it fails (Playwright's own default, 5 s for
# `expect` and 30 s for locators, is shorter than a chart takes to draw on a 2-core machine under load):
# a condition that holds ends the wait at once, so a long limit costs nothing when the code is right.
WAIT_MS = 60_000
SETTLED = '[data-testid="stApp"][data-test-script-state="notRunning"]'
NOT_STALE = "() => !document.querySelector('[data-stale=\"true\"]')"
# Counts the app's script runs in this document. `window.__attnvizRuns`: runs seen starting (the app's
# script state turning "running"): right after a goto or a reload the app reads "notRunning" before its
# first run has even started, so a settled state means something only once a run has begun.
# `window.__attnvizEnds`: whole-script runs that ended, read from the server's own messages — each
# ForwardMsg that carries `script_finished` (field 6, a varint) with FINISHED_SUCCESSFULLY (0) or
# FINISHED_WITH_COMPILE_ERROR (1); a fragment's run (3) or a run cut short by a rerun (2) is not counted.
# Not from the script-state attribute: on a loaded machine the browser can take a run's start and end
# messages in one task, React draws one state, and the attribute never reads "running" for that run
# (a click's run was then never seen to end). `window.__attnvizReruns`: the rerun requests the page sent
# (a click on a button reached Streamlit's own handler). Installed in every page by `new_context`.
COUNT_RUNS = """
(() => {
  window.__attnvizRuns = 0;
  window.__attnvizEnds = 0;
  const finished = (bytes) => {  // script_finished's value in a ForwardMsg, or null
    let i = 0;
    const varint = () => { let x = 0, scale = 1, b; do { b = bytes[i++]; x += (b & 0x7f) * scale; scale *= 128; } while (b & 0x80 && i < bytes.length); return x; };
    while (i < bytes.length) {
      const tag = varint(), field = Math.floor(tag / 8), wire = tag % 8;
      if (field === 6 && wire === 0) return varint();
      if (wire === 0) varint(); else if (wire === 2) { const n = varint(); i += n; } else if (wire === 1) i += 8;
      else if (wire === 5) i += 4; else return null;
    }
    return null;
  };
  window.__attnvizReruns = 0;  // rerun requests this page sent (BackMsg.rerun_script, field 11)
  const hasField = (bytes, wanted) => {  // a top-level length-delimited field `wanted` in a message
    let i = 0;
    const varint = () => { let x = 0, scale = 1, b; do { b = bytes[i++]; x += (b & 0x7f) * scale; scale *= 128; } while (b & 0x80 && i < bytes.length); return x; };
    while (i < bytes.length) {
      const tag = varint(), field = Math.floor(tag / 8), wire = tag % 8;
      if (field === wanted && wire === 2) return true;
      if (wire === 0) varint(); else if (wire === 2) { const n = varint(); i += n; } else if (wire === 1) i += 8;
      else if (wire === 5) i += 4; else return false;
    }
    return false;
  };
  const Native = window.WebSocket;
  const send = Native.prototype.send;
  const Counting = function (...args) {
    const ws = new Native(...args);
    ws.send = function (data) {
      const bytes = data instanceof ArrayBuffer ? new Uint8Array(data) : ArrayBuffer.isView(data) ? new Uint8Array(data.buffer, data.byteOffset, data.byteLength) : null;
      if (bytes && hasField(bytes, 11)) window.__attnvizReruns += 1;
      return send.call(ws, data);
    };
    ws.addEventListener('message', (event) => {
      if (!(event.data instanceof ArrayBuffer)) return;
      const status = finished(new Uint8Array(event.data));
      if (status === 0 || status === 1) { window.__attnvizEnds += 1; window.__attnvizRuns += 1; }
    });
    return ws;
  };
  Counting.prototype = Native.prototype;
  for (const k of ['CONNECTING', 'OPEN', 'CLOSING', 'CLOSED']) Counting[k] = Native[k];
  window.WebSocket = Counting;
  let last = null;
  const look = () => {
    const app = document.querySelector('[data-testid="stApp"]');
    const now = app ? app.getAttribute('data-test-script-state') : null;
    if (now === 'running' && last !== 'running') window.__attnvizRuns += 1;
    last = now;
  };
  new MutationObserver(look).observe(document, {subtree: true, childList: true, attributes: true,
                                                 attributeFilter: ['data-test-script-state']});
})();
"""
RAN = "() => window.__attnvizRuns === undefined || window.__attnvizRuns > 0"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`streamlit run <script>`, headless, on 127.0.0.1; stopped by `stop()`.

    Args:
        script: the app (default: the repository's app.py).
        env: extra environment variables for the server (e.g. ATTNVIZ_CACHE_MB).
        log: write the server's output to test-artifacts/ (else discard it).
        port: the port (default: a free one); a stopped server's, to restart it under open tabs.
    """

    def __init__(
        self, script: Path | None = None, env: dict[str, str] | None = None, log: bool = True, port: int = 0
    ):
        self.port = port or free_port()
        # Its own folders: saved training runs here, converted checkpoints in the test session's cache
        # (converting SmolLM2 once per test session, not per server or process), never the user's.
        self.home = Path(tempfile.mkdtemp(prefix=f"attnviz-server-{self.port}-"))
        own = {"ATTNVIZ_TRAIN_DIR": str(self.home / "training"), "ATTNVIZ_CACHE_DIR": str(converted_cache())}
        self.url = f"http://127.0.0.1:{self.port}"
        ARTIFACTS.mkdir(exist_ok=True)
        self.log = ARTIFACTS / f"server-{self.port}.log" if log else None
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "streamlit",
                "run",
                str(script or ROOT / "app.py"),
                "--server.headless=true",
                f"--server.port={self.port}",
                "--server.address=127.0.0.1",
                "--browser.gatherUsageStats=false",
                "--server.fileWatcherType=none",
            ],
            cwd=ROOT,
            env={**os.environ, **own, **(env or {})},
            stdout=self.log.open("w") if self.log else subprocess.DEVNULL,
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
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"streamlit did not become healthy in 60 s; see {self.log}")

    def rss(self) -> int:
        return rss_bytes(self.proc.pid)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.home, ignore_errors=True)


# The test session's own folder: tests/conftest.py makes it in the first pytest process, and its xdist
# workers, servers and subprocesses inherit it, so each GGUF file is converted once per session.
SESSION_ENV = "ATTNVIZ_TEST_SESSION_DIR"


@functools.cache
def converted_cache() -> Path:
    """The folder for converted checkpoints (`ATTNVIZ_CACHE_DIR` of test servers): the test session's,
    shared by all its processes; outside pytest (a benchmark), this process's own, removed at exit."""
    if os.environ.get(SESSION_ENV):
        return Path(os.environ[SESSION_ENV]) / "converted"
    folder = Path(tempfile.mkdtemp(prefix="attnviz-test-cache-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def launch_chromium(playwright):
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


def new_context(browser, viewport: tuple[int, int] = (1400, 1000)):
    """A browser context whose pages count the app's script runs (see `COUNT_RUNS`, `settle`)."""
    ctx = browser.new_context(viewport={"width": viewport[0], "height": viewport[1]})
    ctx.add_init_script(COUNT_RUNS)
    ctx.set_default_timeout(WAIT_MS)
    return ctx


def settle(page, timeout_ms: int = SETTLE_MS) -> None:
    """Wait until a script run of this document has started (pages from `new_context`), then until
    it has finished and nothing is stale: after a goto or a reload, the run that reads the link."""
    page.wait_for_function(RAN, timeout=timeout_ms)
    page.wait_for_selector(SETTLED, timeout=timeout_ms)
    page.wait_for_function(NOT_STALE, timeout=timeout_ms)


def click_and_settle(page, target, timeout_ms: int = SETTLE_MS) -> None:
    """Click something that starts a script run (a form's submit, a button), wait until a run has ended
    since the click, then settle. `settle` alone may return before the click's run has even started."""
    before = page.evaluate("() => window.__attnvizEnds")
    target.click()
    page.wait_for_function(f"() => window.__attnvizEnds > {before}", timeout=timeout_ms)
    settle(page, timeout_ms)


# Every Plotly chart drawn at its container's width (a resize relayouts them, debounced), then two
# animation frames: what a screenshot taken next shows is what the reader sees.
# Every chart on screen fits its container; a chart in a hidden tab (no box: width 0) is not drawn in a
# screenshot and keeps Plotly's default width until its tab opens, so it is not waited for.
PLOTS_FIT = """() => [...document.querySelectorAll('.js-plotly-plot')].every(p => {
  const full = p._fullLayout, box = p.getBoundingClientRect();
  return !full || box.width === 0 || Math.abs(full.width - box.width) < 2;
})"""
FRAMES = "() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(() => done(true))))"


def painted(page, timeout_ms: int = WAIT_MS) -> None:
    """Wait until every chart fits its container and the next frames are painted (before a screenshot)."""
    page.wait_for_function(PLOTS_FIT, timeout=timeout_ms)
    page.evaluate(FRAMES)


def rss_bytes(pid: int) -> int:
    """Resident memory of a process (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


class MemorySampler(threading.Thread):
    """Samples a process's resident memory every `every_s` until `stop()`, which returns the peak."""

    def __init__(self, pid: int, every_s: float = 0.1):
        super().__init__(daemon=True)
        self.pid, self.every_s, self.peak, self.start_rss = pid, every_s, 0, rss_bytes(pid)
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.peak = max(self.peak, rss_bytes(self.pid))
            time.sleep(self.every_s)

    def stop(self) -> int:
        self._stop_event.set()
        self.join()
        return self.peak
