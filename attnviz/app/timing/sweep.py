"""The Timing page's sweep: what it runs, with how many threads, and what the page says about it."""

from __future__ import annotations

import streamlit as st

from attnviz import bench, settings
from attnviz.app.frame import links
from attnviz.app.frame.loading import APP_THREADS, load_framework
from attnviz.frameworks import label

DEFAULT_IMPLEMENTATIONS = [
    "attnviz-torch",
    "torch-mha-weights",
    "torch-sdpa",
    "attnviz-tf-function",
    "keras-mha-function",
]
LENGTHS = [16, 32, 64, 128, 256, 512, 1024]
DEFAULT_LENGTHS = [128, 256, 512, 1024]
# The matmul ceiling around the page's own sizes (the CLI's default adds 2048 and more repeats,
# which at one thread cost more than the whole default sweep).
CEILING = {"ceiling_sizes": (512, 1024), "ceiling_repeats": 9}
# The default sweep (5 implementations × 4 lengths, d_model 256, 8 heads, one thread) as
# benchmarks/timing_sweep.py measured it on this project's 2-core machine (docs/timing_sweep.md):
# the fastest and slowest runs, and the load average they ran under.
DEFAULT_SWEEP_S = (55, 70)
DEFAULT_SWEEP_LOAD = 20


def request() -> None:
    """The Run button's callback: the sweep runs in the rerun that follows."""
    st.session_state["timing.requested"] = True


def promise() -> str:
    """What the default sweep costs, as measured (the page says this before the first run)."""
    fast, slow = DEFAULT_SWEEP_S
    return (
        f"Choose a sweep and press **Run benchmark**. The default sweep (20 measurements) took {fast}–{slow} s "
        f"on this project's 2-core machine while it was busy (load average {DEFAULT_SWEEP_LOAD}; "
        "docs/timing_sweep.md), less on a quiet one; the progress bar counts the measurements."
    )


def run(cases: list, impls: list[str], device: str, repeats: int) -> None:
    """Run the sweep (the caller holds this server's one sweep slot), keeping partial results if stopped.

    Every framework runs with this server's per-computation thread count (`APP_THREADS`):
    TensorFlow fixes its thread pools the first time it runs in a process, so the app never
    asks it for another count, and `bench.match_threads` sets the others to the same one.
    """
    stop = st.empty()
    stop.button("Stop", key="timing.stop", help="Stops the sweep; the rows measured so far are kept.")
    bar = st.progress(0.0, text="Setting up: thread counts and the matmul ceiling…")
    for fw in sorted({bench.REGISTRY[i].framework for i in impls}):
        load_framework(fw)
    result = {"meta": {}, "rows": []}
    st.session_state["timing.result"] = result  # partial results survive a stop
    sweep = bench.iter_sweep(cases, impls, device, repeats=repeats, threads=APP_THREADS, **CEILING)
    for meta, row, done, total in sweep:
        result["meta"] = meta
        if row is not None:
            result["rows"].append(row)
        bar.progress(done / total, text=f"{done} of {total} measured")
    bar.empty()
    stop.empty()


def threads_sentence(meta: dict) -> str:
    """The thread counts in force and the threads seen busy, per framework; why when they differ."""
    threads, busy = meta.get("threads", {}), meta.get("threads_busy", {})
    counts = sorted(set(threads.values()))
    seen = ", ".join(f"{label(fw)} {n}" for fw, n in busy.items() if n is not None)
    seen = f" Threads seen busy on the matmul ceiling: {seen}." if seen else ""
    if len(counts) == 1:
        n = counts[0]
        return (
            f"**{n} thread{'s' if n != 1 else ''} in each framework** — this server's count per computation "
            f"(ATTNVIZ_THREADS): TensorFlow fixes its thread pools the first time it runs in a process, so the "
            f"app keeps one count for every framework.{seen} `python -m attnviz.bench --threads N` measures "
            "other counts in a fresh process."
        )
    return (
        "**The frameworks ran with different thread counts** ("
        + ", ".join(f"{label(fw)} {n}" for fw, n in threads.items())
        + "): TensorFlow's thread pools were fixed earlier in this server process and PyTorch could not be "
        f"set to match.{seen} The times below are not comparable across frameworks, so no comparison is drawn."
    )


def duration_sentence(meta: dict, n_rows: int) -> str:
    if "duration_s" not in meta:
        return f"Stopped after {n_rows} measurements."
    return (
        f"This sweep took {meta['duration_s']:.1f} s: {n_rows} measurements and the matmul ceiling, "
        "measured at the start and at the end."
    )


HEADS, D_MODELS, BATCHES, MASKS = [1, 2, 4, 8, 16], [64, 128, 256, 512], [1, 2, 4], ["none", "causal"]
REPEATS = (3, 50)


def link_notes(link: dict[str, list[str]], implementations: list[str], devices: list[str]) -> list[str]:
    """What the link asked for that the Timing page's controls do not offer, in the explorer's words."""
    texts = {
        "timing.impls": implementations,
        "timing.lengths": [str(n) for n in LENGTHS],
        "timing.heads": [str(n) for n in HEADS],
        "timing.d_model": [str(n) for n in D_MODELS],
        "timing.batch": [str(n) for n in BATCHES],
        "timing.dtype": list(settings.CHOICES["dtype"]),
        "timing.mask": MASKS,
        "timing.device": devices,
    }
    notes = [note for key, options in texts.items() for note in links.choices(link, key, options)]
    return notes + links.number(link, "timing.repeats", *REPEATS)
