"""How long the Timing page's default sweep takes, the promise the page makes before it runs.

    python benchmarks/timing_sweep.py [--runs 3] [--browser] [--out docs/timing_sweep.md]

Library: the sweep the page runs (`attnviz.app.timing.sweep.run`: its defaults, the server's thread
count, the page's matmul ceiling), in a fresh process each time, timed end to end (framework
imports apart). Browser (`--browser`): the real page in headless Chromium, from the click on
Run benchmark to the fourth chart, on a server that has just started. The load average is
recorded with every run: on a shared machine it says more about a figure than anything else.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

ONE_RUN = """
import json, time
from attnviz import bench
from attnviz.frameworks import backend
from attnviz.app.timing import sweep
from attnviz.app.frame.loading import APP_THREADS
for fw in ("torch", "tensorflow"):
    backend(fw).set_threads(APP_THREADS)  # as a worker's frameworks.prepare does
cases = [bench.Case(1, n, 8, 256, "float32", "none") for n in sweep.DEFAULT_LENGTHS]
start = time.perf_counter()
for meta, row, done, total in bench.iter_sweep(
    cases, sweep.DEFAULT_IMPLEMENTATIONS, "cpu", repeats=7, threads=APP_THREADS, **sweep.CEILING
):
    pass
print(json.dumps({"wall_s": time.perf_counter() - start, "rows": total, "threads": meta["threads"],
                  "busy": meta["threads_busy"]}))
"""


def library_run() -> dict:
    load = os.getloadavg()[0]
    out = subprocess.run(
        [sys.executable, "-c", ONE_RUN], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return {**json.loads(out.stdout.strip().splitlines()[-1]), "load": (load + os.getloadavg()[0]) / 2}


def browser_run() -> dict:
    from playwright.sync_api import expect, sync_playwright

    from tests.live import Server, launch_chromium, settle

    load = os.getloadavg()[0]
    server = Server(log=False)
    try:
        with sync_playwright() as p:
            browser = launch_chromium(p)
            page = browser.new_page(viewport={"width": 1440, "height": 900})
            page.goto(f"{server.url}/timing")
            settle(page)
            start = time.perf_counter()
            page.get_by_role("button", name="Run benchmark").click()
            expect(page.locator(".js-plotly-plot")).to_have_count(4, timeout=900_000)
            wall = time.perf_counter() - start
            browser.close()
    finally:
        server.stop()
    return {"wall_s": wall, "load": (load + os.getloadavg()[0]) / 2}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--browser", action="store_true", help="also time the page in Chromium")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "timing_sweep.md")
    args = parser.parse_args()
    started = time.strftime("%d %b %Y, %H:%M UTC", time.gmtime())
    runs = [("library", library_run()) for _ in range(args.runs)]
    if args.browser:
        runs += [("page in Chromium", browser_run()) for _ in range(args.runs)]
    lines = [
        "## The Timing page's default sweep (`python benchmarks/timing_sweep.py --browser`)",
        "",
        f"Measured {started}. Machine: {platform.machine()}, {os.cpu_count()} cores. The sweep: 5 implementations × lengths "
        "128–1024 (20 measurements), d_model 256, 8 heads, 7 repeats, the server's thread count "
        "(ATTNVIZ_THREADS, default 1) in both frameworks, the matmul ceiling at n = 512 and 1024 at the "
        "start and the end. The page quotes the page-in-Chromium figures (from the click on Run benchmark "
        "to its charts: what a visitor waits) before its first run (`attnviz.app.timing.sweep`).",
        "",
        "| what | wall time | load average (1 min) |",
        "|---|---|---|",
        *(f"| {what} | {r['wall_s']:.1f} s | {r['load']:.1f} |" for what, r in runs),
        "",
    ]
    args.out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
