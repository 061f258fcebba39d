"""How long each step of the modern-attention and circuits lessons takes to build (issue 32 §1), written to
docs/lessons.md.

For each seed, every kept run is dropped (`checkpoints.kept` caches), then the lesson's steps are built in
order, as a student meets them: a step's time is what it computes itself (the ablation step reuses the
scan the induction step ran; the attribution step the sweep of the patching step). Each step is then
built again for the same seed (kept: what every later student with a seed sharing those runs waits).
Last, a 30-seed problem set of each lesson from cold caches: what a teacher's export costs. The load
average before and after is recorded: the machine is shared, and a busy one inflates every figure.
`--threads N` sets the framework's threads first (an entry point's setting; the app leaves the
default): on 2 shared cores a second busy process makes two threads wait on each other at every op.
Each run writes its own section (one per thread count) into `--out`.

Usage: python benchmarks/lessons_bench.py [--seeds 0 1 2] [--threads N] [--out docs/lessons.md]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))

from attnviz import lessons
from attnviz.frameworks import backend
from attnviz.lessons import checkpoints, circuits, lens, problem_set
from benchmarks.doc_section import markers, write_section

MARK = "lessons_bench"
KEPT = (checkpoints.capture, lens.lens_reading, circuits.role_scan, circuits.ablated, circuits.swept,
        circuits.estimated)  # fmt: skip


def timed(fn, *args) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def forget() -> None:
    for kept in KEPT:
        kept.cache_clear()


def load_average() -> str:
    return Path("/proc/loadavg").read_text().split(" ")[0] if Path("/proc/loadavg").exists() else "n/a"


def steps(seeds: list[int]) -> list[dict]:
    rows = []
    for lesson_id in ("modern", "circuits"):
        chosen = lessons.lesson(lesson_id)
        cold: dict[str, list[float]] = {s.key: [] for s in chosen.steps}
        warm: dict[str, list[float]] = {s.key: [] for s in chosen.steps}
        for seed in seeds:
            forget()
            for i, step in enumerate(chosen.steps):
                cold[step.key].append(timed(chosen.exercise, i, seed))
            for i, step in enumerate(chosen.steps):
                warm[step.key].append(timed(chosen.exercise, i, seed))
        for step in chosen.steps:
            rows.append({"id": f"{lesson_id}.{step.key}", "cold": cold[step.key], "warm": warm[step.key]})
    return rows


def table(rows: list[dict], loads: tuple[str, str], setup: dict[str, float], export: dict[str, float],
          seeds: list[int], threads: str) -> str:  # fmt: skip
    lines = [
        f"**PyTorch threads: {threads}.** Made by `python benchmarks/lessons_bench.py` (framework "
        f"{checkpoints.framework()}, {os.cpu_count()} cores; load average {loads[0]} before, {loads[1]} after — "
        f"the machine is shared, so a busy machine inflates every figure). Seeds {', '.join(map(str, seeds))}; "
        "each seed from empty caches, steps in lesson order (a step reuses what an earlier step of the lesson "
        "ran).",
        "",
        f"Loading SmolLM2 (packaged GGUF, converted folder cached): {setup['load']:.1f} s; its first run "
        f"(builds the model): {setup['first']:.1f} s; Gemma 3 270M's config, when installed: "
        f"{setup['gemma']:.2f} s.",
        "",
        "| exercise | first build, median (max) s | kept, median s |",
        "|---|---:|---:|",
    ]
    for row in rows:
        lines.append(f"| {row['id']} | {statistics.median(row['cold']):.2f} ({max(row['cold']):.2f}) | "
                     f"{statistics.median(row['warm']):.3f} |")  # fmt: skip
    lines += ["", "A 30-seed problem set from empty caches (worksheets and keys, Markdown):", ""]
    lines += [f"- {lesson_id}: {seconds:.1f} s" for lesson_id, seconds in export.items()]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--threads", type=int, default=None, help="the framework's threads (default: as is)")
    parser.add_argument("--out", type=Path, default=Path("docs/lessons.md"))
    args = parser.parse_args()
    if args.threads:
        backend(checkpoints.framework()).set_threads(args.threads)
    threads = str(args.threads or backend(checkpoints.framework()).get_threads())
    before = load_average()
    setup = {"load": timed(checkpoints.load)}
    setup["first"] = timed(lambda: checkpoints.load().run("warm up", checkpoints.framework()))
    has_gemma = checkpoints.available(checkpoints.GEMMA)
    setup["gemma"] = timed(checkpoints.config, checkpoints.GEMMA) if has_gemma else float("nan")
    rows = steps(args.seeds)
    export = {}
    for lesson_id in ("modern", "circuits"):
        forget()
        export[lesson_id] = timed(problem_set.markdown, range(30), (lesson_id,))
    section = table(rows, (before, load_average()), setup, export, args.seeds, threads)
    print(section)
    write_section(args.out, section, *markers(f"{MARK} {threads}"))


if __name__ == "__main__":
    main()
