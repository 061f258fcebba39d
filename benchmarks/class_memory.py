"""What a class's memory reaches on a live server, and what it comes back to (issue 46 §24).

Four visitors, each in their own Chromium context, open the issue's four tabs one after another:
Decoding with SmolLM2 in TensorFlow, Decoding with Gemma 3 in TensorFlow, Tiles, and Compare
models. The server's and each worker's resident memory (`VmRSS`, the server's process and its
children) is sampled every half second: the peak of each, and the whole. Then every tab closes and
no request reaches the server; the script waits until the workers have been idle
`ATTNVIZ_WORKER_IDLE_S` (set here to `--idle`) and reads the memory again, and how long it took to
come back.

Prints markdown (the load average before and after is part of it) and writes it between this
script's markers in docs/security.md.

Usage: python benchmarks/class_memory.py [--idle 60] [--out docs/security.md]
"""

from __future__ import annotations

import argparse
import datetime
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402

from benchmarks.doc_section import markers, write_section  # noqa: E402
from tests.live import Server, launch_chromium, new_context, settle  # noqa: E402

TABS = {
    "Decoding, SmolLM2, TensorFlow": "/decoding?decoding.checkpoint=SmolLM2-135M-Instruct&decoding.framework=tensorflow",
    "Decoding, Gemma 3, TensorFlow": "/decoding?decoding.checkpoint=gemma-3-270m&decoding.framework=tensorflow",
    "Tiles": "/tiles",
    "Compare models": "/models",
}
SETTLE_MS = 600_000  # a first open under load (Gemma in TensorFlow): minutes
MIB = 2**20


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def resident(server_pid: int) -> dict[int, int]:
    """pid → resident bytes of the server and every process under it."""
    root = psutil.Process(server_pid)
    found = {}
    for proc in [root, *root.children(recursive=True)]:
        try:
            found[proc.pid] = proc.memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return found


class Peaks(threading.Thread):
    """Samples `resident` every half second: each process's peak and the whole's."""

    def __init__(self, server_pid: int):
        super().__init__(daemon=True)
        self.server_pid, self.each, self.whole = server_pid, {}, 0
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            now = resident(self.server_pid)
            for pid, rss in now.items():
                self.each[pid] = max(self.each.get(pid, 0), rss)
            self.whole = max(self.whole, sum(now.values()))
            time.sleep(0.5)

    def stop(self) -> None:
        self._done.set()
        self.join()


def gib(n: float) -> str:
    return f"{n / 2**30:.2f}"


def held(found: dict[int, int], pid: int) -> str:
    """A process's resident GiB in a reading, or "ended" where it was gone by then."""
    return gib(found[pid]) if pid in found else "ended"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--idle", type=float, default=60.0, help="ATTNVIZ_WORKER_IDLE_S for the server")
    parser.add_argument("--out", default=str(ROOT / "docs" / "security.md"))
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    before = loadavg()
    srv = Server(env={"ATTNVIZ_WORKER_IDLE_S": f"{args.idle:g}"})
    rows, opened = [], {}
    try:
        peaks = Peaks(srv.proc.pid)
        peaks.start()
        with sync_playwright() as p:
            browser = launch_chromium(p)
            contexts = []
            for name, path in TABS.items():
                ctx = new_context(browser)
                contexts.append(ctx)
                page = ctx.new_page()
                t = time.perf_counter()
                page.goto(srv.url + path)
                settle(page, SETTLE_MS)
                errors = page.locator('[data-testid="stException"]').count()
                opened[name] = (time.perf_counter() - t, errors)
            with_tabs = resident(srv.proc.pid)
            for ctx in contexts:
                ctx.close()
            closed_at = time.perf_counter()
            browser.close()
        peaks.stop()
        deadline = closed_at + args.idle + 120
        workers = lambda now: sum(v for k, v in now.items() if k != srv.proc.pid)  # noqa: E731
        while time.perf_counter() < deadline:
            now = resident(srv.proc.pid)
            if time.perf_counter() - closed_at > args.idle and workers(now) < workers(with_tabs) / 2:
                break
            time.sleep(2)
        back_s = time.perf_counter() - closed_at
        time.sleep(5)  # the warm replacements finish importing their frameworks
        idle = resident(srv.proc.pid)
    finally:
        srv.stop()
    server = srv.proc.pid
    rows.append("| process | peak with the four tabs (GiB) | with the tabs open | idle, no visitor left |")
    rows.append("|---|---:|---:|---:|")
    rows.append(
        f"| the server | {gib(peaks.each.get(server, 0))} | {gib(with_tabs.get(server, 0))} | {gib(idle.get(server, 0))} |"
    )
    for i, pid in enumerate(sorted(k for k in peaks.each if k != server and peaks.each[k] > 100 * MIB)):
        rows.append(
            f"| worker {i + 1} (pid {pid}) | {gib(peaks.each[pid])} | {held(with_tabs, pid)} | {held(idle, pid)} |"
        )
    fresh = [pid for pid in idle if pid != server and pid not in with_tabs]
    rows.append(f"| fresh warm workers after idle ({len(fresh)}) | | | {gib(sum(idle[p] for p in fresh))} |")
    rows.append(
        f"| **the whole** | **{gib(peaks.whole)}** | {gib(sum(with_tabs.values()))} | **{gib(sum(idle.values()))}** |"
    )
    opens = ", ".join(
        f"{name} {s:.0f} s" + (f" ({e} errors)" if e else "") for name, (s, e) in opened.items()
    )
    text = "\n".join(
        [
            f"Measured by `python benchmarks/class_memory.py --idle {args.idle:g}` on "
            f"{datetime.date.today():%d %b %Y}, a 2-core machine shared with five other engineers' work "
            f"(load average {before} before, {loadavg()} after; memory does not depend on the load, times do). "
            f"First opens: {opens}. The workers' memory came back {back_s:.0f} s after the last tab closed "
            f"(`ATTNVIZ_WORKER_IDLE_S={args.idle:g}`).",
            "",
            *rows,
        ]
    )
    print(text)
    write_section(args.out, text, *markers("class_memory"))


if __name__ == "__main__":
    main()
