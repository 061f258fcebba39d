"""One score taken apart on SmolLM2-135M-Instruct: how long `score_parts` takes, and the worked example.

Measures, in one process (medians of `--repeats`, after one warm-up call per framework):
- the forward pass the split reads (`ckpt.run(..., capture_layer=…, head_outputs=True)`);
- `attnviz.interp.score_parts` (that run, then the float64 split of one score);
- `attnviz.interp.score_row` (the same for every key the query sees, and the lift);
for each framework, on the worked example: the role scan's top induction head (4 sequences of 16
random tokens, seed 0, as the screen's defaults) at the second-to-last token of
`score_table.example.EXAMPLE_TEXT`, on the key the induction story predicts. Writes its section of
docs/interp.md with the date, the machine and its load (`/proc/loadavg`) before and after.

Usage: python benchmarks/score_parts_bench.py [--repeats 5] [--threads 1] [--out docs/interp.md]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))

from attnviz import frameworks, pretrained
from attnviz.interp import roles, score_parts, score_row
from attnviz.interp.score_table import example, words
from benchmarks.doc_section import markers, write_section

NAME = "SmolLM2-135M-Instruct"


def median_s(fn, repeats: int) -> tuple[float, float, float]:
    """`(median, best)` wall seconds of `repeats` calls, and their median CPU seconds (this process,
    every thread: what the call costs whatever the machine's load)."""
    times, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(times), min(times), statistics.median(cpu)


def load() -> str:
    """The 1-, 5- and 15-minute load averages."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--threads", type=int, default=1, help="intra-op threads per framework (the app's ATTNVIZ_THREADS: 1)"
    )
    parser.add_argument("--out", default=str(Path(__file__).parents[1] / "docs" / "interp.md"))
    args = parser.parse_args()
    before = load()
    ckpt = pretrained.load_choice(NAME)
    scan = roles.scan(ckpt, "torch", half=16, n=4, seed=0)
    (layer, head, _), previous = scan.top("induction", 1)[0], scan.top("previous_token", 5)
    text, ids = example.EXAMPLE_TEXT, ckpt.encode(example.EXAMPLE_TEXT)[0]
    query = example.example_query(ids)
    key = example.induction_target(ids, query)
    rows = []
    for framework in ("torch", "tensorflow"):
        frameworks.backend(framework).set_threads(args.threads)
        score_parts(ckpt, text, layer, head, query, key, framework)  # warm-up: the model built
        run = median_s(
            lambda fw=framework: ckpt.run(text, fw, capture_layer=layer, head_outputs=True), args.repeats
        )
        split = median_s(
            lambda fw=framework: score_parts(ckpt, text, layer, head, query, key, fw), args.repeats
        )
        row = median_s(lambda fw=framework: score_row(ckpt, text, layer, head, query, fw), args.repeats)
        rows.append((framework, run, split, row))
        print(framework, run, split, row, flush=True)
    parts = score_parts(ckpt, text, layer, head, query, key, "torch")
    partner = example.partner(parts, [(a, b) for a, b, _ in previous])
    after = load()
    text = report(rows, parts, partner, (layer, head, query, key, len(ids)), before, after, args)
    write_section(args.out, text, *markers("score-parts"))


def cell(t: tuple[float, float, float]) -> str:
    return f"{t[0]:.2f} ({t[1]:.2f}) / {t[2]:.2f}"


def report(rows, parts, partner, where, before, after, args) -> str:
    layer, head, query, key, T = where
    threads = args.threads
    lines = [
        "## Each score taken apart (issue 44 §2)",
        "",
        f"Measured {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC by `benchmarks/score_parts_bench.py` on "
        f"{platform.machine()}, {os.cpu_count()} CPUs ({threads} intra-op thread{'s' * (threads != 1)} per framework, as the app's workers), load average {before} before and "
        f"{after} after — a machine shared with other engineers, so the wall times are inflated. Medians (best) of "
        f"{args.repeats} calls, seconds, SmolLM2-135M-Instruct, L{layer}.H{head} on the {T}-token worked example:",
        "",
        "Each cell: wall median (best) / CPU seconds (median).",
        "",
        "| framework | the forward pass it reads | `score_parts` (one score) | `score_row` (every key, and the lift) |",
        "|---|---|---|---|",
    ]
    for framework, run, split, row in rows:
        lines.append(f"| {framework} | {cell(run)} | {cell(split)} | {cell(row)} |")
    lines += [
        "",
        f"The worked example: the role scan's top induction head L{layer}.H{head} at query {query} "
        f"({parts.tokens[query]!r}) scores key {key} ({parts.tokens[key]!r}) — the token after the query's "
        f"first occurrence — **{parts.score:.4f}**; the {parts.table.size:,} terms sum to {parts.total:.4f}. "
        "The largest terms:",
        "",
        *[f"- {s}" for s in words.largest(parts, 5)],
        "",
    ]
    if partner is not None:
        lines.append(
            f"Among the scan's top 5 previous-token heads, **{partner[0]}** gives the most through its output at "
            f"the key: its terms sum to {partner[1]:+.2f} of the score {parts.score:.2f} (every other key-side part "
            f"together: {parts.score - partner[1]:+.2f})."
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
