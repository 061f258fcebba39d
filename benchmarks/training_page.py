"""The Training lab's wall time in the browser beside the library's, same run (issue 28 §3), and a
bystander's explorer while two trainings run.

1. For each preset and framework: the library's `training.train(preset, fw)` in this process, then
   the real page in headless Chromium against a live server (Start clicked → the page shows
   "finished" and has settled), interleaved so both see the same load. The page trains in one of
   the server's worker processes (`attnviz.training.schedule.train`) at the workers' niceness (10) with one
   thread; the library calls here run with the same thread count and, once the server and the
   browser have started, at the same niceness. Target: page ≤ 1.3 × library.
2. The bystander: another visitor's explorer heatmap (a fresh seed each time: nothing cached), from
   the link to the drawn chart, on the idle server and while two induction trainings run in two
   other tabs (`ATTNVIZ_MAX_CONCURRENT_RUNS=3`: two trainings and one worker free). Medians of
   interleaved rounds. Target: ≤ 1.5 × idle.

The cold visitor's case (`--cold-rounds`, first): for each preset and framework a fresh server (default
workers, `ATTNVIZ_WARM_WORKERS` the framework) whose first visitor opens the lab, waits until the
server's workers are idle (started, framework imported, and whatever warm-up the app gives them done:
read from their CPU time in /proc) and trains once — beside the library's first training in a fresh
process (`library cold`) and its warm one. The warm rows then measure both sides warm: the library's
process has trained in each framework before, and so has every worker of the server (`WARM_ROUNDS` rounds of two tiny trainings at once in each framework: a
worker's first training pays the task's imports and the framework's first trace once, measured apart in
docs/training.md). With `--baseline DIR` a second server runs the app of another checkout (the code
before a change), measured in the same rounds, interleaved.

Writes test-artifacts/training-page.json and, with --out, its section of docs/benchmarks.md.

    python -m benchmarks.training_page [--presets reverse,induction] [--frameworks torch,tensorflow]
        [--rounds 1] [--bystander-rounds 3] [--baseline /path/to/checkout] [--out docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))

from attnviz import training
from attnviz.frameworks import label, prepare
from benchmarks.doc_section import write_section
from tests.live import ARTIFACTS, Server, launch_chromium, new_context, settle

TARGET, BYSTANDER_TARGET = 1.3, 1.5
BEGIN, END = "<!-- training_page.py: begin -->", "<!-- training_page.py: end -->"
WORKER_NICE = 10  # attnviz.exec.Budget's default: the page's training runs at this niceness
LONG = 600_000
# Rounds of two tiny trainings at once per framework before the figures: each round lands on two of the
# three workers, so four leave a given worker cold with probability (1/3)^4.
WARM_ROUNDS = 4
TINY = "&training.steps=20&training.d_model=16"


# Every chart of the page drawn: the first screen's pattern maps, before Start is pressed.
CHARTS_DRAWN = """() => [...document.querySelectorAll('[data-testid="stPlotlyChart"]')]
  .every(c => c.querySelector('.main-svg'))"""


def library_seconds(preset: str, fw: str) -> float:
    began = time.perf_counter()
    training.train(training.PRESETS[preset], fw, threads=1)
    return time.perf_counter() - began


def open_lab(browser, url: str, query: str):
    ctx = new_context(browser, (1440, 900))
    page = ctx.new_page()
    page.goto(f"{url}/training?{query}", timeout=LONG)
    settle(page, LONG)
    page.wait_for_function(CHARTS_DRAWN, timeout=LONG)  # a visitor presses Start on a drawn page
    return page


def start(page) -> None:
    page.locator('[data-testid="stMain"]').get_by_role("button", name="Start", exact=True).click()


def progress_says(page, text: str) -> None:
    page.wait_for_function(
        "t => [...document.querySelectorAll('[data-testid=\"stProgress\"]')].some(p => p.innerText.includes(t))",
        arg=text,
        timeout=LONG,
        polling=50,
    )


def steps_seconds(page) -> float:
    """The worker's own time in the steps, as the finished page says it ("… · 5.2 s of steps · …",
    summed over its frameworks): what is left of the page's time is the page's."""
    texts = page.locator('[data-testid="stProgress"]').all_inner_texts()
    return sum(float(m) for t in texts for m in re.findall(r"([\d.]+) s of steps", t))


def page_seconds(browser, url: str, preset: str, fw: str, extra: str = "") -> tuple[float, float, float]:
    """Start clicked until the page shows "finished" and has settled: (seconds, `steps_seconds`, seconds
    from "finished" shown to settled: the browser drawing the final view, the final run's end)."""
    page = open_lab(browser, url, f"training.task={preset}&training.framework={label(fw)}{extra}")
    began = time.perf_counter()
    start(page)
    progress_says(page, "finished")
    shown = time.perf_counter()
    settle(page, LONG)
    took = time.perf_counter() - began
    steps = steps_seconds(page)
    page.context.close()
    return took, steps, began + took - shown


def explorer_seconds(browser, url: str, seed: int) -> float:
    page = new_context(browser, (1440, 900)).new_page()
    began = time.perf_counter()
    page.goto(f"{url}/explorer?seed={seed}", timeout=LONG)
    page.locator('[data-testid="stMain"] .js-plotly-plot').first.wait_for(state="visible", timeout=LONG)
    took = time.perf_counter() - began
    page.context.close()
    return took


def warm_workers(browser, url: str, fw: str) -> None:
    """Every worker of the server has trained in `fw` (`WARM_ROUNDS` rounds of two tiny trainings at once)."""
    for _ in range(WARM_ROUNDS):
        tabs = [
            open_lab(browser, url, f"training.task=reverse&training.framework={label(fw)}{TINY}")
            for _ in "ab"
        ]
        for tab in tabs:
            start(tab)
        for tab in tabs:
            progress_says(tab, "finished")
            tab.context.close()


def children(pid: int) -> list[int]:
    """The process ids of `pid`'s children (the server's workers and multiprocessing's helper)."""
    kids = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            kids += [int(k) for k in (task / "children").read_text().split()]
    return kids


def cpu_seconds(pid: int) -> float:
    """`pid`'s user + system CPU time so far (0 for a process that is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def running(pid: int) -> bool:
    """Whether any thread of `pid` is runnable or in the disk (R, D): a worker waiting for its next
    task sleeps in every thread. (Its CPU time alone cannot tell: at niceness 10 on a loaded machine
    a busy worker may get almost none.)"""
    states = []
    for task in Path(f"/proc/{pid}/task").glob("*/stat"):
        with contextlib.suppress(OSError):
            states.append(task.read_text().rsplit(")", 1)[1].split()[0])
    return any(state in "RD" for state in states)


def workers_idle(srv, workers: int, quiet_s: float = 2.0) -> None:
    """Wait until the server has `workers` worker children and none of them ran in `quiet_s`
    (sampled every 0.05 s)."""
    began, quiet_since = time.monotonic(), None
    while time.monotonic() - began < LONG / 1000:
        kids = children(srv.proc.pid)
        if len(kids) < workers or any(running(k) for k in kids):
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= quiet_s:
            return
        time.sleep(0.05)  # the sampling period of a poll, not a wait for an event
    raise TimeoutError(f"the server's {workers} workers were not idle within {LONG / 1000:g} s")


def library_cold_seconds(preset: str, fw: str) -> float:
    """The library's first training of `preset` in a fresh process that has imported `fw`."""
    code = (
        "import time\n"  # at this process's niceness, the workers' (`main`)
        f"from attnviz import training; from attnviz.frameworks import prepare; prepare({fw!r})\n"
        f"t = time.perf_counter(); training.train(training.PRESETS[{preset!r}], {fw!r}, threads=1)\n"
        "print(time.perf_counter() - t)"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return float(out.stdout.split()[-1])


def cold_page_seconds(
    browser, app: Path | None, env: dict, preset: str, fw: str
) -> tuple[float, float, float, float]:
    """A fresh server's first training of `preset` in `fw`, its workers idle first: `page_seconds`'s
    three, then how long after the server's start its workers were idle."""
    env, began = {**env, "ATTNVIZ_WARM_WORKERS": fw}, time.monotonic()
    srv = Server(app, env={**env, "PYTHONPATH": str(app.parent)}) if app else Server(env=env)
    try:
        page = open_lab(browser, srv.url, f"training.task={preset}&training.framework={label(fw)}")
        workers_idle(srv, 2)
        ready = time.monotonic() - began
        page.context.close()
        return (*page_seconds(browser, srv.url, preset, fw), ready)
    finally:
        srv.stop()


def cold_rows(browser, apps: dict, presets: list[str], frameworks: list[str], rounds: int) -> list[dict]:
    """Per round, preset and framework: the library warm and cold, then each app (name → app.py, None:
    this checkout's) on a fresh server, its first training."""
    rows = []
    for n in range(rounds):
        for preset in presets:
            for fw in frameworks:
                load = os.getloadavg()[0]
                row = {"round": n, "case": "cold", "preset": preset, "framework": fw,
                       "library_s": library_seconds(preset, fw),
                       "library_cold_s": library_cold_seconds(preset, fw)}  # fmt: skip
                for name, app in apps.items():
                    took, steps, drawn, ready = cold_page_seconds(browser, app, {}, preset, fw)
                    row |= {f"{name}_s": took, f"{name}_steps_s": steps, f"{name}_drawn_s": drawn,
                            f"{name}_ready_s": ready}  # fmt: skip
                row |= {"ratio": row["page_s"] / row["library_s"], "load": (load + os.getloadavg()[0]) / 2}
                rows.append(row)
                print(json.dumps(row), flush=True)
    return rows


def training_rows(browser, urls: dict, presets: list[str], frameworks: list[str], rounds: int) -> list[dict]:
    """Per round, preset and framework: the library, then the page on each server in `urls` (name → url)."""
    for fw in frameworks:  # every worker warm: its first training is the cold rows' figure
        for url in urls.values():
            warm_workers(browser, url, fw)
    rows = []
    for n in range(rounds):
        for preset in presets:
            for fw in frameworks:
                load = os.getloadavg()[0]
                row = {
                    "round": n,
                    "preset": preset,
                    "framework": fw,
                    "library_s": library_seconds(preset, fw),
                }
                for name, url in urls.items():
                    took, steps, drawn = page_seconds(browser, url, preset, fw)
                    row |= {f"{name}_s": took, f"{name}_steps_s": steps, f"{name}_drawn_s": drawn}
                row |= {"ratio": row["page_s"] / row["library_s"], "load": (load + os.getloadavg()[0]) / 2}
                rows.append(row)
                print(json.dumps(row), flush=True)
    return rows


def medians(rows: list[dict]) -> list[dict]:
    """One row per preset and framework: the median of each time over the rounds, and its ratio."""
    out = []
    for key in dict.fromkeys((r.get("case", "warm"), r["preset"], r["framework"]) for r in rows):
        same = [r for r in rows if (r.get("case", "warm"), r["preset"], r["framework"]) == key]
        row = {"case": key[0], "preset": key[1], "framework": key[2], "rounds": len(same)}
        for name in [k for k in same[0] if k.endswith("_s")]:
            row[name] = statistics.median(r[name] for r in same)
        row["ratio"] = statistics.median(r["page_s"] / r["library_s"] for r in same)
        if "baseline_s" in row:
            row["baseline_ratio"] = statistics.median(r["baseline_s"] / r["library_s"] for r in same)
        row["load"] = statistics.median(r["load"] for r in same)
        out.append(row)
    return out


def bystander(browser, url: str, rounds: int) -> dict:
    """The explorer's time idle and while two induction trainings run, interleaved rounds."""
    explorer_seconds(browser, url, 10_000)  # the explorer's first open (imports) is not a figure
    idle, busy, seed = [], [], 10_001
    induction = "training.task=induction&training.framework=PyTorch"
    for _ in range(rounds):
        idle.append(explorer_seconds(browser, url, seed))
        tabs = [open_lab(browser, url, induction) for _ in range(2)]
        for tab in tabs:
            start(tab)
        for tab in tabs:
            progress_says(tab, "training ·")
        busy.append(explorer_seconds(browser, url, seed + 1))
        for tab in tabs:
            tab.context.close()  # their trainings stop with their tabs
        seed += 2
    row = {"idle_s": statistics.median(idle), "two_trainings_s": statistics.median(busy), "idle_runs_s": idle,
           "busy_runs_s": busy, "load": os.getloadavg()[0]}  # fmt: skip
    row["ratio"] = row["two_trainings_s"] / row["idle_s"]
    print(json.dumps(row), flush=True)
    return row


def section(rows: list[dict], by: dict | None, load: tuple[str, str], baseline: str | None = None) -> str:
    """The markdown section: medians per preset and framework (`medians(rows)`), the bystander."""
    before = " | before page s | before / library" if baseline else ""
    lines = [
        "## Training lab in the page vs the library (`python -m benchmarks.training_page`)",
        "",
        f"Load average before / after: {load[0]} / {load[1]} on 2 cores shared with other work. The page "
        "trains in a worker process (`attnviz.training.schedule.train`, one thread, niceness 10); the library "
        "call runs with one thread at the same niceness. *warm*: the library's process and every worker of "
        "the server have trained in the framework before; *cold*: a fresh server's first training, its "
        "visitor having waited until the workers were idle (*workers ready*: seconds from the server's "
        "start), beside the library's warm run and its first run in a fresh process (*library cold*). "
        "*of which steps*: the worker's own time in the training steps, as the finished page says it; "
        '*after finished shown*: from the page\'s saying "finished" to its having settled (the rest of '
        "the final run and the browser drawing the final view). "
        'Page: Start clicked until it shows "finished" and has settled (Chromium, 1440 × 900). Medians of '
        "the rounds, interleaved"
        + (f"; *before*: the same rounds on a second server running {baseline}." if baseline else "."),
        "",
        f"| case | preset | framework | library s | library cold s | page s | of which steps s "
        f"| after finished shown s "
        f"| page / library (target ≤ {TARGET})"
        f"{before} | workers ready s | load | rounds |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if baseline else ""),
    ]
    for r in medians(rows):
        mark = "" if r["ratio"] <= TARGET else " ✗"
        old = f" {r['baseline_s']:.1f} | {r['baseline_ratio']:.2f} |" if baseline else ""
        cold = f"{r['library_cold_s']:.1f}" if "library_cold_s" in r else "—"
        ready = f"{r['page_ready_s']:.0f}" if "page_ready_s" in r else "—"
        if baseline and "baseline_ready_s" in r:
            ready += f" (before: {r['baseline_ready_s']:.0f})"
        lines.append(
            f"| {r['case']} | {r['preset']} | {label(r['framework'])} | {r['library_s']:.1f} | {cold} | "
            f"{r['page_s']:.1f} | {r['page_steps_s']:.1f} | {r['page_drawn_s']:.1f} | {r['ratio']:.2f}{mark} |"
            f"{old} {ready} | "
            f"{r['load']:.1f} | {r['rounds']} |"
        )
    if by:
        mark = "" if by["ratio"] <= BYSTANDER_TARGET else " ✗"
        lines += [
            "",
            "A bystander: another visitor's explorer heatmap (link to drawn chart, a new seed each time) on "
            "the idle server and while two induction trainings run in two other tabs "
            f"(`ATTNVIZ_MAX_CONCURRENT_RUNS=3`), medians of {len(by['idle_runs_s'])} interleaved rounds:",
            "",
            f"| idle | two trainings | ratio (target ≤ {BYSTANDER_TARGET}) |",
            "|---|---|---|",
            f"| {by['idle_s']:.2f} s | {by['two_trainings_s']:.2f} s | {by['ratio']:.2f}{mark} |",
        ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", default=",".join(training.PRESETS))
    parser.add_argument("--frameworks", default="torch,tensorflow")
    parser.add_argument("--rounds", type=int, default=1, help="interleaved warm rounds of every preset")
    parser.add_argument(
        "--cold-rounds", type=int, default=1, help="rounds of the cold visitor's case (0: none)"
    )
    parser.add_argument("--cold-presets", default="reverse,copy", help="the presets measured cold")
    parser.add_argument("--bystander-rounds", type=int, default=3, help="0: skip the bystander")
    parser.add_argument(
        "--baseline", type=Path, default=None, help="a checkout whose app.py is measured beside"
    )
    parser.add_argument("--baseline-name", default=None, help="how the section names it (default: its path)")
    parser.add_argument("--out", type=Path, default=None, help="write the section into this markdown file")
    args = parser.parse_args()
    presets, frameworks = (
        [p for p in args.presets.split(",") if p],
        [f for f in args.frameworks.split(",") if f],
    )
    from playwright.sync_api import sync_playwright

    load_before = " / ".join(f"{v:.1f}" for v in os.getloadavg())
    # Three workers: two trainings at once for the bystander and one free. Each imports the measured
    # frameworks when the server starts them (ATTNVIZ_WARM_WORKERS): otherwise a TensorFlow run that
    # lands on a worker other than the warm-up's pays TensorFlow's import (10-20 s) inside the figure.
    env = {"ATTNVIZ_MAX_CONCURRENT_RUNS": "3", "ATTNVIZ_WARM_WORKERS": ",".join(frameworks)}
    rows, by, servers = [], None, {}
    try:
        with sync_playwright() as p:
            browser = launch_chromium(p)
            os.nice(
                WORKER_NICE
            )  # the library calls below at the workers' niceness (server and browser keep 0)
            for fw in frameworks:  # the library's warm side: imports and first traces are not the figures
                prepare(fw)  # ATTNVIZ_THREADS (1) in each framework, as a worker sets it
                training.train(training.PRESETS["reverse"].replace(steps=20), fw, threads=1)
            if args.cold_rounds:
                apps = {"page": None} | ({"baseline": args.baseline / "app.py"} if args.baseline else {})
                cold = [p for p in args.cold_presets.split(",") if p]
                rows += cold_rows(browser, apps, cold, frameworks, args.cold_rounds)
            if args.rounds or args.bystander_rounds:  # the warm servers, started after the cold ones end
                servers["page"] = Server(env=env)
            if (
                args.baseline and args.rounds
            ):  # its own attnviz first on the path (Streamlit puts app.py's folder first)
                servers["baseline"] = Server(
                    args.baseline / "app.py", env={**env, "PYTHONPATH": str(args.baseline)}
                )
            urls = {name: srv.url for name, srv in servers.items()}
            if args.rounds:
                rows += training_rows(browser, urls, presets, frameworks, args.rounds)
            if args.bystander_rounds:
                by = bystander(browser, servers["page"].url, args.bystander_rounds)
            browser.close()
    finally:
        for srv in servers.values():
            srv.stop()
    load_after = " / ".join(f"{v:.1f}" for v in os.getloadavg())
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "training-page.json").write_text(json.dumps({"rows": rows, "bystander": by}, indent=2))
    text = section(
        rows,
        by,
        (load_before, load_after),
        args.baseline_name or (f"`{args.baseline}`" if args.baseline else None),
    )
    print(text)
    if args.out:
        write_section(args.out, text, BEGIN, END)


if __name__ == "__main__":
    main()
