"""App performance: explorer rerun server time, figure bytes, time to first chart, and what the
first chart's server side costs.

    python benchmarks/app_perf.py [--repeats 7] [--out docs/performance.md]
    python benchmarks/app_perf.py --first-chart-only [--rounds 5]
    python benchmarks/app_perf.py --profile-only
    python benchmarks/app_perf.py --generation-only [--rounds 5]
    python benchmarks/app_perf.py --keras-session-only [--repeats 7]
    python benchmarks/app_perf.py --rerun-page-only [--rounds 3] [--repeats 7] [--baseline <checkout>/app.py]

1. Server time of an explorer rerun (AppTest, in process): each rerun changes
   the seed, so the result is computed afresh (no cache hit), then the figure
   is built and serialised. Median of the repeats.
2. Bytes of figure data the page sends (the plotly specs).
3. Time to first chart in headless Chromium, from server start, for the
   explorer and for a minimal Streamlit page with one plotly chart, measured
   the same way in the same run (interleaved cold starts, medians); and on each of those servers,
   once the first visitor's page has settled, a new visitor's (a second browser context) from its
   link to its first chart (issue 42: ≤ the minimal page's + 0.5 s).
4. The start profiled (`--profile-only`): each piece of the explorer's first run timed in a fresh
   interpreter, in the order the page pays for it (Streamlit, app.py's imports, the explorer's own,
   the NumPy preview figure, then PyTorch and its first runs), beside the minimal page's.
5. SmolLM2's 20-token generation in the page (`--generation-only`): the Pretrained page's Generate
   toggle clicked (once the page's charts are drawn: before that the click waited for Chromium to
   finish painting the page, up to 1.5 s counted as generation) → "Stopped at …" shown, against the library's `Checkpoint.generate` with the same
   prompt, settings and end tokens in this process, interleaved rounds with fresh seeds (nothing
   cached), medians. The page's generation runs in a worker (`attnviz.pretrained.tasks.generate`) at the
   workers' niceness (10), one thread; the library calls here run with one thread at niceness 10.
6. Keras's session (`--keras-session-only`): the explorer's rerun once Keras is imported (as in a
   server where a visitor has used TensorFlow), with Streamlit's own after-run cleanup
   (`keras.backend.clear_session()` after every run) against attnviz's (`attnviz.app.frame.
   keras_session.keep`), in PyTorch and in TensorFlow: one AppTest session, blocks of `repeats` reruns
   alternating between the two, each rerun with a new seed; the first rerun of each block is dropped
   (it follows the other mode's last cleanup), medians of the rest.
7. The explorer's rerun on the page (`--rerun-page-only`), in Chromium: one server per checkout (this
   one, and `--baseline`'s, e.g. the previous main), the explorer opened at its default
   configuration and drawn once; then `rounds` × `repeats` reruns of each kind, the servers
   alternating rerun by rerun: "same configuration" (Streamlit's R shortcut: the run comes from the server's result
   cache) and "new seed" (the sidebar's Seed set to a number not used before: the run is computed
   afresh — since issue 42 in a worker). Each from the key press to the run's end reaching the page
   (`window.__attnvizEnds`) and nothing stale; medians.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.doc_section import markers, write_section  # noqa: E402
from tests.live import CHROMIUM, CHROMIUM_ARGS, free_port  # noqa: E402

MINIMAL_APP = """
import numpy as np
import plotly.graph_objects as go
import streamlit as st

st.plotly_chart(go.Figure(go.Heatmap(z=np.random.default_rng(0).random((8, 8)))))
"""


def rerun_times(query: dict, repeats: int) -> dict:
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    at.switch_page("pages/explorer.py").run()
    times, sizes = [], []
    for seed in range(1, repeats + 1):
        at.number_input(key="seed").set_value(seed)
        start = time.perf_counter()
        at.run()
        times.append(time.perf_counter() - start)
        assert not at.exception, at.exception
        sizes.append(sum(len(c.proto.spec) for c in at.get("plotly_chart")))
    return {
        "median_s": statistics.median(times),
        "min_s": min(times),
        "max_s": max(times),
        "figure_bytes": statistics.median(sizes),
    }


def keras_session(repeats: int, blocks: int = 2) -> dict:
    from streamlit.runtime.scriptrunner import script_runner
    from streamlit.testing.v1 import AppTest

    from attnviz.app.frame import keras_session as kept_session

    streamlit_own, keep = getattr(script_runner, kept_session.HOOK), kept_session.keep  # before app.py runs
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.query_params["framework"] = "tensorflow"  # Keras imported, as after any visitor's TensorFlow run
    at.run()
    at.switch_page("pages/explorer.py").run()
    assert "keras" in sys.modules
    report, seed = {}, 0
    try:
        for framework in ("torch", "tensorflow"):
            at.radio(key="framework").set_value(framework).run()
            times = {"streamlit": [], "kept": []}
            for _ in range(blocks):
                for mode in times:
                    if mode == "streamlit":
                        kept_session.keep = lambda: False  # app.py's call leaves Streamlit's hook
                        setattr(script_runner, kept_session.HOOK, streamlit_own)
                    else:
                        kept_session.keep = keep
                    for i in range(repeats + 1):
                        seed += 1
                        at.number_input(key="seed").set_value(seed)
                        start = time.perf_counter()
                        at.run()
                        if i:
                            times[mode].append(time.perf_counter() - start)
                        assert not at.exception, at.exception
            report[framework] = {mode: statistics.median(t) for mode, t in times.items()}
            report[framework]["reruns_each"] = len(times["kept"])
    finally:
        kept_session.keep = keep
        keep()
    return report


def time_to_first_chart(script: Path, path: str) -> tuple[float, float]:
    """Seconds from the server's start to the first chart drawn in Chromium (a cold start), and then,
    once that first visitor's page has settled, a new visitor's (a second browser context on the
    running server) from its link to its first chart drawn."""
    from playwright.sync_api import sync_playwright

    from tests.live import new_context, settle

    port = free_port()
    start = time.perf_counter()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            str(script),
            "--server.headless=true",
            f"--server.port={port}",
            "--server.address=127.0.0.1",
            "--browser.gatherUsageStats=false",
        ],
        cwd=script.parent
        if (script.parent / "attnviz").is_dir()
        else ROOT,  # a checkout runs its own attnviz
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    chart = ".js-plotly-plot .main-svg"
    try:
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1)
                break
            except OSError:
                time.sleep(0.05)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = new_context(browser).new_page()
            page.goto(f"http://127.0.0.1:{port}/{path}")
            page.locator(chart).first.wait_for(state="visible", timeout=600_000)
            cold = time.perf_counter() - start
            if path == "explorer":  # its first run draws the preview, then the framework's run
                page.locator('[data-testid="stMetricValue"]').first.wait_for(timeout=600_000)
            settle(page, 600_000)
            visitor = new_context(browser).new_page()
            start = time.perf_counter()
            visitor.goto(f"http://127.0.0.1:{port}/{path}")
            visitor.locator(chart).first.wait_for(state="visible", timeout=600_000)
            second = time.perf_counter() - start
            browser.close()
        return cold, second
    finally:
        proc.terminate()
        proc.wait()


PROFILE = r"""
import json, time
t = time.perf_counter
out, mark = {}, t()

def lap(name):
    global mark
    now = t(); out[name] = now - mark; mark = now

import streamlit, numpy, plotly.graph_objects as go
lap("import streamlit, numpy, plotly")
if MINIMAL:
    fig = go.Figure(go.Heatmap(z=numpy.random.default_rng(0).random((8, 8))))
    fig.to_json(); lap("one heatmap figure, serialised")
else:
    from attnviz.app import controls
    from attnviz.app.frame import door, link_values
    from attnviz.app.frame.pages import PAGES, by_title
    lap("app.py's imports (attnviz.app: frame, sidebar, settings, plots)")
    from attnviz.app.explorer import preview
    from attnviz.interp.scores import head_summary
    from attnviz.plots import heatmaps
    lap("the explorer page's own imports")
    from attnviz import settings
    cfg = dict(settings.DEFAULTS)
    prepared = settings.check(cfg)
    q_labels, k_labels = settings.labels(cfg)
    weights = preview.reference_weights(cfg)
    fig = heatmaps.head_grid(weights[0], q_labels, k_labels)
    fig.to_json(); lap("the preview: the NumPy float64 reference and its figure, serialised")
    import torch
    from attnviz.frameworks import backend
    backend("torch").set_threads(1); lap("import PyTorch and attnviz's backend (after the first chart)")
    from attnviz.run import run_attention, time_attention
    spec, x_q, x_kv, params = prepared
    run_attention(spec, "torch", "cpu", x_q=x_q, x_kv=x_kv, params=params); lap("the first PyTorch run")
    time_attention(spec, "torch", "cpu", x_q=x_q, x_kv=x_kv, params=params); lap("its steady-state time")
print(json.dumps(out))
"""


def profile(rounds: int = 3) -> dict:
    """Medians over `rounds` fresh interpreters: seconds of each piece, explorer and minimal page."""
    out = {}
    for name, minimal in (("minimal", True), ("explorer", False)):
        runs = []
        for _ in range(rounds):
            code = f"MINIMAL = {minimal}\n{PROFILE}"
            done = subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
            )
            runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        out[name] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    out["load_average"] = " / ".join(f"{v:.1f}" for v in __import__("os").getloadavg())
    return out


GEN_TEXT = "The Eiffel Tower is in the city of"
GEN_NAME = "SmolLM2-135M-Instruct"


def generation(rounds: int = 5) -> dict:
    """Medians of `rounds` interleaved pairs: the page's 20-token generation and the library's."""
    import os

    from playwright.sync_api import sync_playwright

    from attnviz import pretrained
    from attnviz.frameworks import prepare
    from tests.live import Server, new_context, painted, settle

    def page_seconds(browser, url: str, seed: int) -> float:
        query = (f"pre.checkpoint={GEN_NAME}&pre.tab=Next+token&pre.text={GEN_TEXT.replace(' ', '+')}"
                 f"&pre.new_tokens=20&pre.temperature=1&pre.seed={seed}")  # fmt: skip
        page = new_context(browser, (1440, 900)).new_page()
        page.goto(f"{url}/pretrained?{query}", timeout=600_000)
        settle(page, 600_000)
        painted(page, 600_000)  # the page as its visitor sees it before the click, its charts drawn
        began = time.perf_counter()
        page.get_by_text("Generate", exact=True).click()
        page.get_by_text("Stopped at").first.wait_for(state="visible", timeout=600_000)
        took = time.perf_counter() - began
        page.context.close()
        return took

    def library_seconds(ckpt, seed: int) -> float:
        began = time.perf_counter()
        ckpt.generate(GEN_TEXT, "torch", 20, temperature=1.0, seed=seed, stop_at=ckpt.end_tokens())
        return time.perf_counter() - began

    srv = Server()
    pages, libs, load_before = [], [], os.getloadavg()[0]
    try:
        with sync_playwright() as p:
            browser = launch(p)
            prepare("torch")  # one thread, as in a worker
            ckpt = pretrained.load_choice(GEN_NAME)
            ckpt.model("torch")
            os.nice(10)  # the library at the workers' niceness (the server and the browser keep theirs)
            library_seconds(ckpt, 999)
            page_seconds(browser, srv.url, 999)  # the worker loads SmolLM2: not a figure
            for seed in range(1, rounds + 1):
                libs.append(library_seconds(ckpt, seed))
                pages.append(page_seconds(browser, srv.url, seed))
            browser.close()
    finally:
        srv.stop()
    lib, page = statistics.median(libs), statistics.median(pages)
    return {"library_s": lib, "page_s": page, "ratio": page / lib, "library_runs_s": libs, "page_runs_s": pages,
            "load": f"{load_before:.1f} / {os.getloadavg()[0]:.1f}"}  # fmt: skip


def launch(playwright):
    from tests.live import launch_chromium

    return launch_chromium(playwright)


def first_chart(rounds: int = 3, baseline: Path | None = None) -> dict:
    """Medians of `rounds` interleaved cold starts: the minimal page, the explorer (and the explorer
    of another checkout, `baseline`'s app.py, e.g. the previous main, measured in the same rounds)."""
    with tempfile.TemporaryDirectory() as tmp:
        minimal = Path(tmp) / "minimal_app.py"
        minimal.write_text(MINIMAL_APP)
        apps = {"minimal": (minimal, ""), "explorer": (ROOT / "app.py", "explorer")}
        if baseline:
            apps["baseline explorer"] = (baseline, "explorer")
        runs = {name: [] for name in apps}
        visitors = {name: [] for name in apps}
        for _ in range(rounds):  # alternate, so each sees the same machine state
            for name, (script, path) in apps.items():
                cold, visitor = time_to_first_chart(script, path)
                runs[name].append(cold)
                visitors[name].append(visitor)
    medians = {k: statistics.median(v) for k, v in runs.items()}
    visitor_medians = {k: statistics.median(v) for k, v in visitors.items()}
    return {
        **medians,
        "gap_s": medians["explorer"] - medians["minimal"],
        "runs_s": runs,
        "new_visitor_s": visitor_medians,
        "new_visitor_gap_s": visitor_medians["explorer"] - visitor_medians["minimal"],
        "new_visitor_runs_s": visitors,
        "load_average": " / ".join(f"{v:.1f}" for v in __import__("os").getloadavg()),
    }


def _serve(app: Path) -> tuple[subprocess.Popen, str]:
    """`streamlit run app` from its own checkout (its attnviz imported), healthy; the process and URL."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(app), "--server.headless=true", f"--server.port={port}",
         "--server.address=127.0.0.1", "--browser.gatherUsageStats=false", "--server.fileWatcherType=none"],
        cwd=app.parent, env={**__import__("os").environ, "PYTHONPATH": str(app.parent)},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    while True:
        try:
            urllib.request.urlopen(f"{url}/_stcore/health", timeout=1)
            return proc, url
        except OSError:
            time.sleep(0.05)


def _rerun_s(page, trigger, key: str) -> float:
    """Seconds from `trigger(key)` to the end of the run it starts reaching the page, nothing stale."""
    from tests.live import NOT_STALE

    before = page.evaluate("() => window.__attnvizEnds")
    start = time.perf_counter()
    trigger(key)
    page.wait_for_function(f"() => window.__attnvizEnds > {before}", timeout=600_000, polling=5)
    page.wait_for_function(NOT_STALE, timeout=600_000, polling=5)
    return time.perf_counter() - start


def rerun_page(rounds: int = 3, repeats: int = 7, baseline: Path | None = None) -> dict:
    """The explorer's rerun in Chromium, this checkout against `baseline`'s (see the module's 7.)."""
    from playwright.sync_api import sync_playwright

    from tests.live import new_context, settle

    apps = {"this checkout": ROOT / "app.py"} | ({"baseline": baseline} if baseline else {})
    servers = {name: _serve(app) for name, app in apps.items()}
    times = {name: {"same configuration": [], "new seed": []} for name in apps}
    seeds = iter(range(1000, 100_000))
    try:
        with sync_playwright() as p:
            browser = launch(p)
            pages = {}
            for name, (_, url) in servers.items():
                pages[name] = new_context(browser).new_page()
                pages[name].goto(f"{url}/explorer")
                settle(pages[name], 600_000)
                pages[name].locator('[data-testid="stMetricValue"]').first.wait_for(timeout=600_000)
            for _ in range(rounds * repeats):  # the servers alternate rerun by rerun
                for name, page in pages.items():
                    page.locator("h1").first.click()  # the focus out of any input: R reruns the app
                    times[name]["same configuration"].append(_rerun_s(page, page.keyboard.press, "r"))
                    seed = page.get_by_label("Seed")
                    seed.fill(str(next(seeds)))
                    times[name]["new seed"].append(
                        _rerun_s(page, page.keyboard.press, "Enter")
                    )  # in the Seed field
            browser.close()
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait()
    return {
        "medians_s": {n: {k: statistics.median(v) for k, v in t.items()} for n, t in times.items()},
        "runs_s": times,
        "load_average": " / ".join(f"{v:.1f}" for v in __import__("os").getloadavg()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", type=Path, default=None, help="write a markdown report here")
    parser.add_argument(
        "--first-chart-only", action="store_true", help="only the cold-start first-chart measurement"
    )
    parser.add_argument(
        "--baseline", type=Path, default=None, help="another checkout's app.py, measured in the same rounds"
    )
    parser.add_argument("--rounds", type=int, default=3, help="cold starts (or fresh interpreters) per page")
    parser.add_argument("--profile-only", action="store_true", help="only the start's profile")
    parser.add_argument(
        "--generation-only", action="store_true", help="only SmolLM2's generation, page vs library"
    )
    parser.add_argument(
        "--keras-session-only", action="store_true", help="only the rerun with and without Keras's clear"
    )
    parser.add_argument(
        "--rerun-page-only", action="store_true", help="only the explorer's rerun in Chromium"
    )
    args = parser.parse_args()

    if args.rerun_page_only:
        load = " / ".join(f"{v:.1f}" for v in __import__("os").getloadavg())
        report = rerun_page(args.rounds, args.repeats, baseline=args.baseline)
        print(json.dumps({**report, "load_average_before": load}, indent=2))
        return

    if args.first_chart_only:
        print(json.dumps(first_chart(args.rounds, baseline=args.baseline), indent=2))
        return
    if args.profile_only:
        print(json.dumps(profile(args.rounds), indent=2))
        return
    if args.generation_only:
        print(json.dumps(generation(args.rounds), indent=2))
        return
    if args.keras_session_only:
        load = " / ".join(f"{v:.1f}" for v in __import__("os").getloadavg())
        print(json.dumps({**keras_session(args.repeats), "load_average_before": load}, indent=2))
        return
    default = rerun_times({}, args.repeats)
    large = rerun_times({"len_q": "512", "n_heads": "16", "d_model": "512"}, args.repeats)
    ttfc = first_chart()
    first = ttfc.pop("runs_s")
    ttfc.pop("new_visitor_runs_s")
    report = {
        "machine": f"{platform.processor() or platform.machine()}, {__import__('os').cpu_count()} cores, "
        f"Python {platform.python_version()}",
        "explorer_rerun_default": default,
        "explorer_rerun_len512_16heads": large,
        "time_to_first_chart_s": ttfc,
        "time_to_first_chart_runs_s": first,
        "load_average": " / ".join(f"{v:.1f}" for v in __import__("os").getloadavg()),
    }
    print(json.dumps(report, indent=2))
    if args.out:
        lines = [
            "## App performance (`python benchmarks/app_perf.py`)",
            "",
            f"Machine: {report['machine']}. Medians of {args.repeats} reruns (each with a new seed, so "
            "nothing comes from the cache) and of 3 cold starts.",
            f"Load average during the run: {report['load_average']} (the machine is shared; "
            "figures under load are slower than on a quiet machine).",
            "",
            "| measure | target | measured |",
            "|---|---|---|",
        ]
        rows = [
            (
                "explorer rerun, default configuration (server time)",
                "≤ 150 ms",
                f"{default['median_s'] * 1e3:.0f} ms",
            ),
            ("explorer rerun, len 512 × 16 heads, d_model 512", "≤ 1.5 s", f"{large['median_s']:.2f} s"),
            ("figure data sent at len 512 × 16 heads", "≤ 3 MB", f"{large['figure_bytes'] / 1e6:.2f} MB"),
            ("first chart visible from server start: minimal page", "reference", f"{ttfc['minimal']:.2f} s"),
            (
                "first chart visible from server start: explorer",
                "≤ minimal + 1.0 s (issue 11)",
                f"{ttfc['explorer']:.2f} s (+{ttfc['explorer'] - ttfc['minimal']:.2f} s)",
            ),
            (
                "a new visitor's first chart on a running server: explorer",
                "≤ minimal + 0.5 s (issue 42)",
                f"{ttfc['new_visitor_s']['explorer']:.2f} s (+{ttfc['new_visitor_gap_s']:.2f} s; "
                f"minimal {ttfc['new_visitor_s']['minimal']:.2f} s)",
            ),
        ]
        lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
        write_section(args.out, "\n".join(lines), *markers("app_perf"))


if __name__ == "__main__":
    main()
