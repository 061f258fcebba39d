"""How long the speech lesson's step takes to build (issue 43's lesson step), written to docs/lessons.md.

The step transcribes one bundled clip with Whisper tiny.en (`attnviz.lessons.speech.heard`, kept per clip
and framework) and reads the word's row. For each round and each clip (interleaved: clip 1, 2, …, then
again), the kept transcription is dropped and the step built (first build: what the first student of a
class on that clip waits, the model already loaded in the worker), then built again for another seed on
the same clip (kept: what every later student waits). Medians of the rounds. A 30-seed problem set from
empty caches, last. One framework thread, as `attnviz.exec` runs its tasks (`ATTNVIZ_THREADS`). The load
average before and after is recorded: the machine is shared, and a busy one inflates every figure.

Usage: python benchmarks/speech_lesson_bench.py [--rounds 3] [--framework torch] [--out docs/lessons.md]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))

from attnviz.frameworks import backend
from attnviz.lessons import checkpoints, problem_set
from attnviz.lessons.core import rng
from attnviz.lessons.speech import spans
from benchmarks.doc_section import markers, write_section

MARK = "speech_lesson_bench"


def timed(fn, *args, **kwargs) -> float:
    start = time.perf_counter()
    fn(*args, **kwargs)
    return time.perf_counter() - start


def load_average() -> str:
    return Path("/proc/loadavg").read_text().split(" ")[0]


def seeds_by_clip() -> dict[str, list[int]]:
    """Two seeds per clip (the seed picks the clip: `spans.span`'s first draw)."""
    names, found = sorted(spans.clips()), {}
    for seed in range(200):
        clip = names[int(rng(seed, 0, spans.LESSON).integers(len(names)))]
        if len(found.setdefault(clip, [])) < 2:
            found[clip].append(seed)
    return found


def row(clip: str, cold: list[float], warm: list[float]) -> str:
    return f"| {clip} | {statistics.median(cold):.2f} ({max(cold):.2f}) | {statistics.median(warm):.3f} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--framework", default=checkpoints.framework())
    parser.add_argument("--out", type=Path, default=Path("docs/lessons.md"))
    args = parser.parse_args()
    backend(args.framework).set_threads(1)
    before = load_average()
    load = timed(checkpoints.load, spans.MODEL)
    cold: dict[str, list[float]] = {}
    warm: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        for clip, (first, second) in seeds_by_clip().items():
            spans.heard.cache_clear()
            cold.setdefault(clip, []).append(timed(spans.span, first, framework=args.framework))
            warm.setdefault(clip, []).append(timed(spans.span, second, framework=args.framework))
    spans.heard.cache_clear()
    export = timed(problem_set.markdown, range(30), ("speech",))
    lines = [
        f"Made by `python benchmarks/speech_lesson_bench.py` on {time.strftime('%Y-%m-%d')} (framework "
        f"{args.framework}, one thread, {os.cpu_count()} cores shared with other engineers' work; load average "
        f"{before} before, {load_average()} after — a busy machine inflates every figure). Medians of "
        f"{args.rounds} interleaved rounds.",
        "",
        f"Loading Whisper tiny.en (float16 `model.bin` read, upcast): {load:.1f} s.",
        "",
        "| clip | first build (transcription), median (max) s | kept, another seed, median s |",
        "|---|---:|---:|",
        *[row(clip, cold[clip], warm[clip]) for clip in cold],
        "",
        f"A 30-seed problem set of the speech lesson from empty caches (Markdown): {export:.1f} s.",
    ]
    section = "\n".join(lines)
    print(section)
    write_section(args.out, section, *markers(MARK))


if __name__ == "__main__":
    main()
