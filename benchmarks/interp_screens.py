"""The Interpret screen's three slow tabs at their defaults, before and after issue 46 point 21:
Composition, QK and OV, and the patching sweep — the library calls the page submits, and the page.

Two commits are unpacked (`git archive`) side by side and measured in interleaved rounds, each
measurement in a fresh process (as a fresh worker and a fresh server meet them):

- **library**: the tasks the tab submits at first open (`attnviz.app.interpret.tasks`), called in
  order in one process with SmolLM2-135M-Instruct: its checkpoint's load, the role scan the tab
  opens on, then the tab's own work (Composition: before every pair of heads, after the chosen
  head's row and the previous-token head's readers; QK and OV: the head's tables and every head's
  copying score; the patching sweep: attribution, the sweep and, before, the two forwards the
  page submitted to redraw the sweep's runs). Also with `OPENBLAS_NUM_THREADS=1` (NumPy's BLAS on one
  thread, as `ATTNVIZ_THREADS` already sets the frameworks').
- **page**: `AppTest` opens the Interpret page on that tab (a link with only `interp.tab`),
  workers spawned by `attnviz.exec` as on a server; the patching sweep is its button's run.

Usage: python benchmarks/interp_screens.py [--before 1bc3349] [--after HEAD] [--rounds 2]
Writes its section of docs/interp.md (medians, the load average before and after).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.doc_section import markers, write_section  # noqa: E402

S = "SmolLM2-135M-Instruct"
SCREENS = ("Composition", "QK and OV", "Patching")
PROMPTS = (
    "When Mary and John went to the store, John gave a drink to",
    "When Mary and John went to the store, Mary gave a drink to",
    " Mary",
    " John",
)


def library(screen: str) -> dict[str, float]:
    """Seconds per part of what `screen` submits at its defaults, in this (fresh) process."""
    from attnviz.app.interpret import tasks
    from attnviz.pretrained import tasks as checkpoint_tasks

    parts: dict[str, float] = {}

    def timed(name, fn):
        start = time.perf_counter()
        value = fn()
        parts[name] = time.perf_counter() - start
        return value

    timed("load", lambda: checkpoint_tasks.checkpoint(S, "torch"))
    if screen == "Patching":
        timed("attribution", lambda: tasks.attribution(S, *PROMPTS, "torch"))
        result = timed("sweep", lambda: tasks.patching_sweep(S, *PROMPTS, "torch"))
        if getattr(result, "clean", None) is None:  # before: the page ran both prompts again
            timed("forwards", lambda: [checkpoint_tasks.forward(S, p, "torch") for p in PROMPTS[:2]])
        return parts
    scan = timed("scan", lambda: tasks.role_scan(S, "torch", 16, 4, 0))
    (pl, ph, _), (a, b, _) = scan.top("previous_token", 1)[0], scan.top("induction", 1)[0]
    if screen == "QK and OV":
        ckpt = checkpoint_tasks.checkpoint(S)
        ids = list(dict.fromkeys(ckpt.encode("When Mary and John went to the store, John gave")[0]))
        timed("tables", lambda: tasks.circuit_tables(S, a, b, ids, 1))
        timed("copying", lambda: tasks.copying_scores(S))
    elif hasattr(tasks, "composition_rows"):
        timed("composition", lambda: tasks.composition_rows(S, "k", ((a, b, True), (pl, ph, False))))
    else:
        timed("composition", lambda: tasks.composition(S, "k"))
    return parts


def page(screen: str, tree: Path) -> dict[str, float]:
    """Seconds to open the Interpret page on `screen` (and, on Patching, to run the sweep)."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(tree / "app.py"), default_timeout=900)
    at.query_params["interp.tab"] = screen
    at.run()
    start = time.perf_counter()
    at.switch_page("pages/interpret.py").run()
    parts = {"open": time.perf_counter() - start}
    if screen == "Patching":
        start = time.perf_counter()
        next(b for b in at.button if b.key == "interp.run_sweep").click().run()
        parts["sweep"] = time.perf_counter() - start
    assert not at.exception and not at.error, (at.exception, at.error)
    return parts


def child(tree: Path, what: str, screen: str, threads: str | None) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    if threads:
        env["OPENBLAS_NUM_THREADS"] = threads
    code = f"from benchmarks.interp_screens import run_child; run_child({what!r}, {screen!r}, {str(tree)!r})"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tree, env=env, capture_output=True, text=True, timeout=900
    )
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_child(what: str, screen: str, tree: str) -> None:
    parts = library(screen) if what == "library" else page(screen, Path(tree))
    print(json.dumps(parts))


def unpack(rev: str, into: Path) -> Path:
    """The tree of `rev`, with this script (the older commit lacks it)."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True, check=True).stdout
    with tempfile.TemporaryFile() as f:
        f.write(archive)
        f.seek(0)
        with tarfile.open(fileobj=f) as tar:
            tar.extractall(into, filter="data")
    (into / "benchmarks" / "interp_screens.py").write_text(Path(__file__).read_text())
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="1bc3349")
    parser.add_argument("--after", default="HEAD")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", default=str(ROOT / "docs" / "interp.md"))
    args = parser.parse_args()
    load_before, started = loadavg(), datetime.datetime.now(datetime.UTC)
    runs = [("library", None), ("library", "1"), ("page", None)]
    found: dict[tuple, list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        trees = {
            "before": unpack(args.before, Path(tmp) / "before"),
            "after": unpack(args.after, Path(tmp) / "after"),
        }
        for r in range(args.rounds):
            for screen in SCREENS:
                for what, threads in runs:
                    for version, tree in trees.items():  # interleaved: before, after, before, after
                        parts = child(tree, what, screen, threads)
                        found.setdefault((screen, what, threads, version), []).append(parts)
                        print(
                            r,
                            screen,
                            what,
                            threads,
                            version,
                            {k: round(v, 2) for k, v in parts.items()},
                            flush=True,
                        )
            write(
                args, found, r + 1, started, load_before, loadavg()
            )  # each round: a stopped run keeps its rounds


def loadavg() -> list[str]:
    return Path("/proc/loadavg").read_text().split()[:3]


def median_parts(rounds: list[dict]) -> dict[str, float]:
    return {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}


def write(args, found, rounds: int, started, load_before, load_after) -> None:
    lines = [
        f"## The three slow tabs at their defaults, before and after (issue 46 point 21, {started:%Y-%m-%d %H:%M} UTC)",
        "",
        f"`python benchmarks/interp_screens.py` ({args.before} against {args.after}; "
        f"{f'medians of {rounds} interleaved rounds' if rounds > 1 else 'one round, before and after interleaved'}, "
        "each measurement a fresh process; {os.cpu_count()} cores shared with five other "
        f"engineers' work: load average {' '.join(load_before)} before, {' '.join(load_after)} after — "
        "read the figures as ratios, not as what a quiet machine gives). Seconds; *library* is the tasks the "
        "tab submits, in one process; *page* is `AppTest` opening the tab (workers started as a server starts them).",
        "",
        "| tab | measured | before | after | parts after |",
        "|---|---|---|---|---|",
    ]
    for screen in SCREENS:
        for what, threads, label in (("library", None, "library"), ("library", "1", "library, 1 BLAS thread"),
                                     ("page", None, "page")):  # fmt: skip
            before = median_parts(found[(screen, what, threads, "before")])
            after = median_parts(found[(screen, what, threads, "after")])
            detail = ", ".join(f"{k} {v:.1f}" for k, v in after.items())
            lines.append(
                f"| {screen} | {label} | {sum(before.values()):.1f} | {sum(after.values()):.1f} | {detail} |"
            )
    write_section(args.out, "\n".join(lines), *markers("interp-screens"))


if __name__ == "__main__":
    main()
