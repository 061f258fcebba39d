"""The Training lab's wall time in the browser beside the library's, same run (issue 21 §3).

For each preset and framework: the library's `training.train(preset, fw)` in this
process, then the real page in headless Chromium against a live server (Start
clicked → the page shows "finished" and has settled), interleaved so both see the
same load. Target: page ≤ 1.3 × library. Writes test-artifacts/training-page.json
and prints the markdown table docs/training.md quotes.

    python -m benchmarks.training_page [--presets reverse,induction] [--frameworks torch,tensorflow]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))

from attnviz import training
from attnviz.frameworks import label
from tests.live import ARTIFACTS, Server, launch_chromium, settle

TARGET = 1.3


def library_seconds(preset: str, fw: str) -> float:
    began = time.perf_counter()
    training.train(training.PRESETS[preset], fw)
    return time.perf_counter() - began


def page_seconds(browser, url: str, preset: str, fw: str, extra: str = "") -> float:
    ctx = browser.new_context(viewport={"width": 1440, "height": 900})
    page = ctx.new_page()
    page.goto(f"{url}/training?training.task={preset}&training.framework={label(fw)}{extra}", timeout=600_000)
    settle(page, 600_000)
    progress = page.locator('[data-testid="stProgress"]').first
    began = time.perf_counter()
    page.locator('[data-testid="stMain"]').get_by_role("button", name="Start", exact=True).click()
    progress.wait_for(state="visible", timeout=600_000)
    page.wait_for_function(
        "() => [...document.querySelectorAll('[data-testid=\"stProgress\"]')]"
        ".some(p => p.innerText.includes('finished'))",
        timeout=600_000,
        polling=50,
    )
    settle(page, 600_000)
    took = time.perf_counter() - began
    ctx.close()
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", default=",".join(training.PRESETS))
    parser.add_argument("--frameworks", default="torch,tensorflow")
    args = parser.parse_args()
    presets, frameworks = args.presets.split(","), args.frameworks.split(",")
    from playwright.sync_api import sync_playwright

    srv = Server()
    rows = []
    try:
        with sync_playwright() as p:
            browser = launch_chromium(p)
            for fw in frameworks:  # warm both sides: imports and first traces are not the figures
                training.train(training.PRESETS["reverse"].replace(steps=20), fw)
                page_seconds(browser, srv.url, "reverse", fw, "&training.steps=20&training.d_model=16")
            for preset in presets:
                for fw in frameworks:
                    load = os.getloadavg()[0]
                    lib = library_seconds(preset, fw)
                    page = page_seconds(browser, srv.url, preset, fw)
                    rows.append(
                        {"preset": preset, "framework": fw, "library_s": lib, "page_s": page, "ratio": page / lib,
                         "load": (load + os.getloadavg()[0]) / 2}
                    )  # fmt: skip
                    print(json.dumps(rows[-1]), flush=True)
            browser.close()
    finally:
        srv.stop()
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "training-page.json").write_text(json.dumps(rows, indent=2))
    print(f"\n| preset | framework | library s | page s | page / library (target ≤ {TARGET}) | load |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        mark = "" if r["ratio"] <= TARGET else " ✗"
        print(
            f"| {r['preset']} | {label(r['framework'])} | {r['library_s']:.1f} | {r['page_s']:.1f} | "
            f"{r['ratio']:.2f}{mark} | {r['load']:.1f} |"
        )


if __name__ == "__main__":
    main()
