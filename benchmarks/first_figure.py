"""Every screen's first figure (issue 46 point 21): each screen opened at its defaults in Chromium on a
running server, the time from navigation to its first drawn Plotly figure, twice — the first visitor
on that server, then a second visitor (a new browser context: a new session) — and whether a
progress indicator was on screen while anything over 2 s was computed.

    python benchmarks/first_figure.py [--rounds 1] [--screens timing,decoding-gemma] [--timeout 300]
                                      [--out docs/performance.md]

What is opened: every page of `attnviz.app.frame.pages.PAGES` at `/<name>`, and the sections that
draw their own figure on first open at their defaults — Interpretability's Patching, Direct logit, QK
and OV and Composition tabs (`interp.tab=…`), Decoding with Gemma 3 (`decoding.checkpoint=`),
Pretrained with each other packaged checkpoint (`pre.checkpoint=`). The Timing page draws only on
request: its row presses Run benchmark once the page has settled (the time still counts from
navigation). A screen with no chart at its defaults is reported as such, with what the page said if
it showed a message.

The packaged checkpoints are converted once before the rounds, into the folder every server of the
run reads (`tests.live.converted_cache`), as a real server finds them after its first day. Each round
starts one fresh server (`tests.live.Server`), opens Home first (the server's first run, which starts
its workers), then every screen in order: a later screen finds the workers (and the checkpoints they
keep) as the earlier ones left them — a running server, as a class meets it. Before and after them,
the floor: a Streamlit page with one Plotly chart and nothing else (`benchmarks/app_perf.py`'s), on
its own server, opened the same way. Times are read in the page (`performance.now()` from the
navigation's start) by a MutationObserver: the first `.js-plotly-plot` holding data, and the first
progress bar or spinner (`stProgress`, `stSpinner`). Medians over rounds; the load average before and
after, with every row. The machine is shared: read the figures as ratios (to the floor, and to the
library's own call for the Timing and Decoding screens, `LIBRARY`).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.app_perf import MINIMAL_APP  # noqa: E402
from benchmarks.doc_section import markers, write_section  # noqa: E402
from tests.live import SETTLED, Server, converted_cache, launch_chromium, new_context  # noqa: E402

# In every document: the first figure with data and the first progress indicator, in ms from the
# navigation's start (the document's time origin).
WATCH = """
(() => {
  const look = () => {
    const now = performance.now();
    if (window.__firstFigure === undefined
        && [...document.querySelectorAll('.js-plotly-plot')].some(p => p.data && p.data.length))
      window.__firstFigure = now;
    if (window.__progressAt === undefined
        && document.querySelector('[data-testid="stProgress"], [data-testid="stSpinner"]'))
      window.__progressAt = now;
    if (window.__placeAt === undefined && document.querySelector('[data-testid="stMain"] [data-testid="stSkeleton"]'))
      window.__placeAt = now;  // Streamlit's loading block where an element's code is still loading
  };
  new MutationObserver(look).observe(document, {subtree: true, childList: true, attributes: true});
})();
"""
# The floor: a Streamlit page with one Plotly chart and nothing else (`benchmarks/app_perf.py`'s), its own
# server, opened the same way before and after the app's screens in every round.
MINIMAL = ("minimal page (floor), before", "minimal page (floor), after")
PROGRESS_AFTER_MS = 2_000  # anything longer must show progress
GRACE_MS, CHART_GRACE_MS = 30_000, 90_000  # after a run settled without a drawn chart: how long to wait


def screens() -> dict[str, tuple[str, str | None]]:
    """`{name: (path and query, button to press once settled or None)}`, in the order opened."""
    from attnviz import pretrained
    from attnviz.app.frame.pages import PAGES

    out: dict[str, tuple[str, str | None]] = {}
    for page in PAGES:
        out[page.name] = ("/" if page.name == "home" else f"/{page.name}", None)
        if page.name == "pretrained":
            for name in list(pretrained.choices())[1:]:  # the first is the page's default
                out[f"pretrained-{name}"] = (f"/pretrained?pre.checkpoint={quote(name)}", None)
        if page.name == "interpret":
            for tab in ("Patching", "Direct logit", "QK and OV", "Composition"):
                slug = tab.lower().replace(" ", "-")
                out[f"interpret-{slug}"] = (f"/interpret?interp.tab={quote(tab)}", None)
        if page.name == "decoding":
            out["decoding-gemma"] = ("/decoding?decoding.checkpoint=gemma-3-270m", None)
    out["timing"] = ("/timing", "Run benchmark")
    return out


def library_decoding_gemma() -> dict:
    """The Decoding page's work for Gemma 3 at its defaults, as its worker runs it, in this fresh
    process: seconds to import PyTorch, to load the checkpoint ("checkpoint"), and to trace the default tokens."""
    from attnviz.app.decoding import work as ui

    began = time.perf_counter()
    from attnviz.app.decoding import tasks
    from attnviz.frameworks import backend, prepare

    prepare("torch")
    backend("torch").set_threads(1)  # the workers' count (ATTNVIZ_THREADS)
    imported = time.perf_counter()
    tasks.checkpoint("gemma-3-270m", "torch")
    loaded = time.perf_counter()
    tasks.decoding_trace("gemma-3-270m", ui.DEFAULT_TEXT, "torch", ui.DEFAULT_NEW_TOKENS)
    done = time.perf_counter()
    return {"import": imported - began, "checkpoint": loaded - imported, "trace": done - loaded}


def library_timing() -> dict:
    """The Timing page's default sweep as its worker runs it, in this fresh process: seconds to import
    the frameworks, to its first row, and to its end."""
    from attnviz import bench
    from attnviz.app.timing import sweep
    from attnviz.exec.monitor import Monitor

    began, first = time.perf_counter(), []
    for fw in {bench.REGISTRY[i].framework for i in sweep.DEFAULT_IMPLEMENTATIONS}:
        from attnviz.frameworks import prepare

        prepare(fw)
    imported = time.perf_counter()
    cases = [bench.Case(1, n, 8, 256, "float32", "none") for n in sweep.DEFAULT_LENGTHS]
    monitor = Monitor(lambda done, total, row: first or row is None or first.append(time.perf_counter()))
    bench.run_sweep(cases, sweep.DEFAULT_IMPLEMENTATIONS, "cpu", repeats=sweep.DEFAULT_REPEATS, threads=1,
                    monitor=monitor, **sweep.CEILING)  # fmt: skip
    done = time.perf_counter()
    return {"import": imported - began, "first row": first[0] - imported, "sweep": done - imported}


LIBRARY = {"decoding-gemma": library_decoding_gemma, "timing": library_timing}


def python(code: str) -> str:
    """`code` in a fresh interpreter at the workers' niceness (10), with the servers' folder of
    converted checkpoints; its standard output."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ATTNVIZ_CACHE_DIR": str(converted_cache())}
    run = ["nice", "-n", "10", sys.executable, "-c", code]
    return subprocess.run(run, cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout


def library(name: str) -> dict:
    """`LIBRARY[name]` in a fresh process: its phases in seconds."""
    code = f"import json; from benchmarks.first_figure import LIBRARY; print(json.dumps(LIBRARY[{name!r}]()))"
    return json.loads(python(code).strip().splitlines()[-1])


def convert_checkpoints() -> None:
    """Every packaged checkpoint read once into the servers' folder of converted checkpoints (Gemma's
    GGUF dequantised to safetensors, ~15 s on a quiet machine): a real server does it once per user and
    file, not once per visit, so no round counts it."""
    python("from attnviz import pretrained\nfor name in pretrained.choices(): pretrained.load_choice(name)")


def load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


# Done: a figure is drawn, or the app's runs (since `window.__endsBefore`) have ended and nothing has run
# for `GRACE_MS` (a screen that draws no chart at its defaults, or a failure shown instead) —
# `CHART_GRACE_MS` where a chart element waits to be drawn (Chromium loads Plotly's code with the first
# chart of a document: seconds under load).
DONE = f"""() => {{
  if (window.__firstFigure !== undefined) return true;
  if (!document.querySelector('{SETTLED}') || window.__attnvizEnds <= (window.__endsBefore ?? 0)) {{
    window.__settledAt = undefined;
    return false;
  }}
  window.__settledAt ??= performance.now();
  const charts = document.querySelector('[data-testid="stPlotlyChart"]');
  return performance.now() - window.__settledAt > (charts ? {CHART_GRACE_MS} : {GRACE_MS});
}}"""
ALERTS = '[data-testid="stException"], [data-testid^="stAlertContent"]'


def open_once(browser, url: str, button: str | None, timeout_ms: int) -> dict:
    """One visitor opens `url` (a new context: a new session): seconds to the first figure (None:
    none), to the first progress indicator, and what the page said where it drew no figure."""
    ctx = new_context(browser)
    ctx.add_init_script(WATCH)
    page = ctx.new_page()
    before = load()
    began = time.perf_counter()
    try:
        page.goto(url, wait_until="commit")
        try:
            if button:
                page.wait_for_selector(SETTLED, timeout=timeout_ms)
                page.wait_for_function("() => window.__attnvizEnds > 0", timeout=timeout_ms)
                page.evaluate("() => { window.__endsBefore = window.__attnvizEnds; }")
                page.get_by_role("button", name=button).click(timeout=timeout_ms)
            page.wait_for_function(DONE, timeout=timeout_ms, polling=100)
            error = None
        except Exception as exc:  # over the limit: reported, the round goes on
            error = f"{type(exc).__name__} after {time.perf_counter() - began:.0f} s"
        figure, progress, place, ends = page.evaluate(
            "() => [window.__firstFigure ?? null, window.__progressAt ?? null, window.__placeAt ?? null,"
            " window.__attnvizEnds]"
        )
        said = (
            " / ".join(t.strip()[:120] for t in page.locator(ALERTS).all_inner_texts())
            if figure is None
            else ""
        )
    finally:
        ctx.close()
    return {
        "figure_s": None if figure is None else figure / 1e3,
        "progress_s": None if progress is None else progress / 1e3,
        "placeholder_s": None if place is None else place / 1e3,
        "error": error or (f"the page said: {said}" if said else None),
        "load": (before, load()),
        "runs": ends,  # the script runs that ended in this document (the log says it, for a reader's doubt)
    }


def run(
    names: list[str], rounds: int, timeout_s: float, done=lambda results: None
) -> tuple[dict, list[float]]:
    """Every round: the minimal page, then one server with `names` in order, then the minimal page
    again; `done(results)` after each screen (the page is written as the run goes)."""
    from playwright.sync_api import sync_playwright

    rows = [MINIMAL[0], *names, MINIMAL[1]]
    results: dict[str, dict[str, list]] = {n: {"first": [], "second": [], "library": []} for n in rows}
    convert_checkpoints()
    loads = [load()]
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        minimal = Path(tmp) / "minimal_app.py"
        minimal.write_text(MINIMAL_APP)
        browser = launch_chromium(p)
        for r in range(rounds):
            measure(browser, minimal, [MINIMAL[0]], results, r, timeout_s, done)
            measure(browser, None, names, results, r, timeout_s, done)
            measure(browser, minimal, [MINIMAL[1]], results, r, timeout_s, done)
        browser.close()
    loads.append(load())
    return results, loads


def measure(
    browser, script: Path | None, names: list[str], results: dict, r: int, timeout_s: float, done
) -> None:
    """One fresh server of `script` (None: the app); its first run, then each of `names` opened by a
    first and a second visitor (and the library's same work where there is one)."""
    table = screens()
    server = Server(script, log=script is None)
    try:
        open_once(browser, server.url + "/", None, int(timeout_s * 1e3))  # the server's first run
        for name in names:
            path, button = table.get(name, ("/", None))
            for visitor in ("first", "second"):
                got = open_once(browser, server.url + path, button, int(timeout_s * 1e3))
                results[name][visitor].append(got)
                print(f"round {r + 1} {name:28s} {visitor:6s} {describe(got)}", flush=True)
            if name in LIBRARY:  # the same work in a fresh process, right after the page's
                results[name]["library"].append({**library(name), "load": load()})
                print(f"round {r + 1} {name:28s} library {results[name]['library'][-1]}", flush=True)
            done(results)
    finally:
        server.stop()


def describe(got: dict) -> str:
    fig = "no chart" if got["figure_s"] is None else f"{got['figure_s']:.1f} s"
    prog = "—" if got["progress_s"] is None else f"{got['progress_s']:.1f} s"
    place = "—" if got.get("placeholder_s") is None else f"{got['placeholder_s']:.1f} s"
    return (
        f"figure {fig} · progress {prog} · loading block {place} · runs {got['runs']} · load {got['load'][0]:.1f}→{got['load'][1]:.1f}"
        + (f" · {got['error']}" if got["error"] else "")
    )


def cell(runs: list[dict]) -> str:
    """The median time to the first figure over rounds, and what else a reader must know."""
    if not runs:
        return "not measured"
    times = [g["figure_s"] for g in runs if g["figure_s"] is not None]
    text = f"{statistics.median(times):.1f} s" if times else "no chart"
    if times and len(times) < len(runs):
        text += f" ({len(runs) - len(times)} of {len(runs)} without one)"
    slow = [g for g in runs if (g["figure_s"] or 0) > PROGRESS_AFTER_MS / 1e3]
    if slow:
        shown = sum(g["progress_s"] is not None and g["progress_s"] < g["figure_s"] for g in slow)
        text += f" · progress shown {shown}/{len(slow)}"
        held = [g for g in slow if g.get("placeholder_s") is not None and g["placeholder_s"] < g["figure_s"]]
        if held:
            text += f" · loading block from {statistics.median(g['placeholder_s'] for g in held):.1f} s {len(held)}/{len(slow)}"
    errors = {g["error"] for g in runs if g["error"]}
    return text + (f" · {'; '.join(sorted(errors))}" if errors else "")


QUIET_LOAD = 4.0  # the run's own server, workers and Chromium on two cores reach about this


def report(results: dict, loads: list[float], rounds: int, began: str) -> str:
    table = screens()
    highest = max(
        [
            *loads,
            *(
                g["load"][i]
                for runs in results.values()
                for v in ("first", "second")
                for g in runs[v]
                for i in (0, 1)
            ),
        ]
    )
    lines = [
        "## Every screen's first figure (issue 46 point 21)",
        "",
        f"`python benchmarks/first_figure.py --rounds {rounds}`, {began} – "
        f"{datetime.datetime.now(datetime.UTC):%H:%M} UTC, {platform.machine()}, {os.cpu_count()} cores, "
        f"load average (1 min) {loads[0]:.1f} before and {loads[-1]:.1f} after, at most {highest:.1f}. "
        + (
            "**The machine was otherwise quiet**: a load up to 4 is the run's own server, workers and browser "
            "on two cores (the load beside each row, read at the start and the end of each open)."
            if highest <= QUIET_LOAD
            else "**The machine was busy** with other engineers' work (the load beside each row, read at the "
            "start and the end of each open): read the times as ratios, not as a quiet machine's."
        ),
        "",
        "Each screen at its defaults in Chromium on a running server (one fresh server per round, Home "
        "opened first, then the screens in this order): the time from navigation to its first Plotly "
        "figure drawn (the Timing page: Run benchmark pressed once the page settled, counted from "
        "navigation); the first visitor on that server, then a second visitor (a new session). "
        "The packaged checkpoints were converted before the rounds (Gemma's GGUF: once per user and "
        "file on a real server). The first and last rows are the floor: a Streamlit page with one chart "
        "and nothing else, on its own server, opened the same way before and after the app's screens. "
        "Medians over rounds. “progress shown k/n”: of the n opens that took over 2 s, k showed a "
        "progress bar or spinner before the figure.",
        "",
        "| screen | link | first visitor | second visitor | load (1 min) |",
        "|---|---|---|---|---|",
    ]
    for name, runs in results.items():
        span = [g["load"][i] for v in ("first", "second") for g in runs[v] for i in (0, 1)]
        link = f"`{table[name][0]}`" if name in table else "one `st.plotly_chart`, its own server"
        lines.append(
            f"| {name} | {link} | {cell(runs['first'])} | {cell(runs['second'])} | "
            f"{min(span):.1f}–{max(span):.1f} |"
        )
    side = {name: runs["library"] for name, runs in results.items() if runs["library"]}
    if side:
        lines += [
            "",
            "The same work as a library call, in a fresh process at the workers' niceness (10) and thread "
            "count (1), run right after the page's first visitor (medians, seconds; `library_*` in the script):",
            "",
            "| screen | phases (library) | load (1 min) |",
            "|---|---|---|",
        ]
        for name, got in side.items():
            phases = [k for k in got[0] if k != "load"]
            text = ", ".join(f"{k} {statistics.median(g[k] for g in got):.1f}" for k in phases)
            lines.append(
                f"| {name} | {text} | {min(g['load'] for g in got):.1f}–{max(g['load'] for g in got):.1f} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--screens", help="comma-separated names (default: all); see --list")
    parser.add_argument("--list", action="store_true", help="print the screens' names and links")
    parser.add_argument("--timeout", type=float, default=300, help="seconds one open may take")
    parser.add_argument("--out", default=str(ROOT / "docs" / "performance.md"), help="'-': print only")
    args = parser.parse_args()
    table = screens()
    if args.list:
        for name, (path, button) in table.items():
            print(f"{name:28s} {path}" + (f"  (then {button})" if button else ""))
        return
    names = args.screens.split(",") if args.screens else list(table)
    unknown = [n for n in names if n not in table]
    if unknown:
        parser.error(f"--screens: unknown {unknown}; allowed: {', '.join(table)}")
    began = f"{datetime.datetime.now(datetime.UTC):%d %b %Y, %H:%M}"

    def write(results: dict, loads: list[float]) -> str:
        measured = {name: runs for name, runs in results.items() if runs["first"]}
        text = report(measured, loads, args.rounds, began)
        if args.out != "-":
            write_section(args.out, text, *markers("first-figure"))
        return text

    before = load()
    results, loads = run(names, args.rounds, args.timeout, lambda got: write(got, [before, load()]))
    print(write(results, loads))


if __name__ == "__main__":
    main()
