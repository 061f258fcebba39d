"""The Timing page's sweep: what it runs, with how many threads, and what the page says about it.

The sweep runs in a worker process (`attnviz.bench.run_sweep` through `door`): the server
only draws its progress, and a Stop keeps the rows measured so far (the task returns them).
"""

from __future__ import annotations

import functools
import time

import streamlit as st

from attnviz import bench, settings
from attnviz import exec as ex
from attnviz.app.frame import door, links, results, session
from attnviz.app.frame.loading import APP_THREADS
from attnviz.app.timing import fields
from attnviz.app.timing.figures import time_vs_length
from attnviz.frameworks import label

RESULT, HANDLE, FAILURE = "timing.result", "timing.handle", "timing.failure"

DEFAULT_IMPLEMENTATIONS = [
    "attnviz-torch",
    "torch-mha-weights",
    "torch-sdpa",
    "attnviz-tf-function",
    "keras-mha-function",
]
LENGTHS = [16, 32, 64, 128, 256, 512, 1024]
DEFAULT_LENGTHS = [128, 256, 512, 1024]
DEFAULT_REPEATS = 7
# The matmul ceiling around the page's own sizes (the CLI's default adds 2048 and more repeats,
# which at one thread cost more than the whole default sweep).
CEILING = {"ceiling_sizes": (512, 1024), "ceiling_repeats": 9}
# The default sweep (5 implementations × 4 lengths, d_model 256, 8 heads, one thread) as
# benchmarks/timing_sweep.py measured it on this project's 2-core machine (docs/timing_sweep.md): the
# page in Chromium, from the click on Run benchmark to its four charts — what a visitor waits — the
# fastest and slowest runs, and the load average they ran under.
DEFAULT_SWEEP_S = (9, 9)
DEFAULT_SWEEP_LOAD = 1


def request() -> None:
    """The Run button's callback: the sweep runs in the rerun that follows."""
    st.session_state["timing.requested"] = True


def promise() -> str:
    """What the default sweep costs, as measured (the page says this before the first run)."""
    fast, slow = DEFAULT_SWEEP_S
    took = f"{fast} s" if fast == slow else f"{fast}–{slow} s"
    return (
        f"Choose a sweep and press **Run benchmark**. The default sweep (20 measurements) took {took} from "
        f"the click to its charts on this project's 2-core machine at a load average of {DEFAULT_SWEEP_LOAD} "
        "(docs/timing_sweep.md); a busy machine takes several times longer. The progress bar counts the "
        "measurements, and the time-vs-length chart grows as each one is measured."
    )


def run(cases: list, impls: list[str], device: str, repeats: int) -> None:
    """Run the sweep in a worker, drawing its progress; a Stop keeps the rows measured so far.

    Every framework runs with this server's per-computation thread count (`APP_THREADS`, the
    workers' too): `bench.match_threads` sets every framework in the worker to the same one. The
    sweep may use up to the sweep budget (`ATTNVIZ_SWEEP_MB`), checked before against its estimate.
    """
    st.session_state.pop(FAILURE, None)
    limits = ex.Limits.from_env().replace(memory_mb=results.SWEEP_BYTES / results.MIB)
    began = time.perf_counter()
    handle = door.start(
        bench.run_sweep, cases, impls, device, repeats=repeats, threads=APP_THREADS, limits=limits, **CEILING
    )
    st.session_state[HANDLE] = handle
    session.button(
        "Stop", key="timing.stop", on_click=stop, help="Stops the sweep; the rows measured so far are kept."
    )
    live = st.empty()  # the time-vs-length chart, redrawn as each row arrives
    try:
        result = door.follow(handle, "Measuring", partials=functools.partial(draw_so_far, live))
        result["meta"]["waited_s"] = (
            time.perf_counter() - began
        )  # what the visitor waited, worker start included
        st.session_state[RESULT] = result
    except ex.TaskError as error:
        st.session_state[FAILURE] = error
    st.session_state.pop(HANDLE, None)
    live.empty()  # the finished sweep's four charts follow


def draw_so_far(slot, rows: tuple[dict, ...]) -> None:
    """The rows measured so far as the time-vs-length chart in `slot`: a visitor sees the first lengths
    while the longer ones are measured (issue 46 point 21). Only where every row ran with the same
    thread count (as the page's own comparison)."""
    rows = list(rows)
    if len({r.get("threads") for r in rows}) == 1:
        slot.plotly_chart(time_vs_length(rows), width="stretch", key=f"timing.live.{len(rows)}")


def stop() -> None:
    """After a sweep's script run was interrupted (the Stop button, any other widget; its task
    asked to stop by `door.follow`): keep the rows the task returns when it stops."""
    handle = st.session_state.pop(HANDLE, None)
    if handle is None:
        return
    handle.stop()
    try:
        st.session_state[RESULT] = handle.result(timeout=handle.limits.grace_s + 5)
    except ex.TaskError as error:
        st.session_state[FAILURE] = error
    except TimeoutError:  # its worker is being ended: nothing came back
        st.session_state[FAILURE] = ex.Stopped(forced=True)


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
    said = (
        f"This sweep took {meta['duration_s']:.1f} s: {n_rows} measurements and the matmul ceiling, "
        "measured at the start and at the end."
    )
    waited = meta.get("waited_s")
    if waited is not None and waited - meta["duration_s"] >= 1:
        said += (
            f" From Run benchmark to these results: {waited:.1f} s — the rest was the worker starting and "
            "importing the frameworks (the first sweep in a worker), or waiting for a free one."
        )
    return said


HEADS, D_MODELS, BATCHES, MASKS = [1, 2, 4, 8, 16], [64, 128, 256, 512], [1, 2, 4], ["none", "causal"]


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
    return notes + fields.REPEATS.notes(link)
