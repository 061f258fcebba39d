"""Runs of the configuration: checked once per configuration in the server, computed once per server
in a worker (cached).

`checked(cfg)` is the one place a configuration is validated and its inputs (and
interpretable heads) are built; the sidebar's error, the page's spec and the
reference preview all read it, so a rerun checks and builds once.

The runs themselves — the recorded run, its steady-state time, the comparison — go to the execution
layer (`attnviz.app.sidebar.tasks` through `attnviz.app.frame.door`, issue 42): the server imports
no framework. What crosses is the configuration's canonical JSON one way and the NumPy result the
page draws the other; the result is kept in the server's one byte-bounded cache
(`attnviz.app.frame.results`), so a rerun with the same configuration does not go to a worker
again. Each is refused before it is sent when its estimate is over the per-run budget
(`settings.check_fits`, in `checked`). What ended a run without a value (no worker free, a worker
that stopped, a framework the worker cannot import) is said on the page in place of its figures
(`door.show_failure`), with a Run again button where trying again may help.
"""

from __future__ import annotations

import re

import streamlit as st

from attnviz import exec as ex
from attnviz import settings
from attnviz.app.frame import door, loading, results, session
from attnviz.app.frame.literal import escape_markdown
from attnviz.app.sidebar import tasks
from attnviz.app.sidebar.mask_editor import mask_editor
from attnviz.app.sidebar.url import runnable_state
from attnviz.cache import MIB, ByteCache
from attnviz.compare import Comparison
from attnviz.errors import BudgetError, SpecError
from attnviz.frameworks import FRAMEWORKS, label
from attnviz.result import AttentionResult
from attnviz.run import Timing

# Configurations checked in the last minute (their spec, inputs and interpretable heads), shared by
# sessions: a rerun's sidebar, page and cached runs reach the same entry instead of rebuilding it.
_CHECKED = ByteCache(64 * MIB, ttl=60)


def checked(cfg: dict) -> settings.Prepared | SpecError:
    """`settings.check(cfg)`, once per configuration: the prepared run, or why it cannot run."""

    def build() -> settings.Prepared | SpecError:
        try:
            return settings.check(cfg)
        except SpecError as error:
            return error.with_traceback(None)  # kept without the frames that raised it

    return _CHECKED.get_or_build(settings.canonical(cfg), build)


def configure(framework_choice: bool = True) -> tuple[dict, object, list[str], list[str]]:
    """The configuration (sidebar drawn by app.py), the mask editor when the mask is custom, the spec.

    When the configuration cannot run, says so in one line (the sidebar shows
    the details next to the control) and stops the page.

    Args:
        framework_choice: kept for the pages' calls; app.py knows each page's
            sidebar from `attnviz.app.frame.pages.PAGES`.

    Returns:
        The configuration (device resolved to what runs), its `AttentionSpec`,
        and the query and key labels.
    """
    del framework_choice
    cfg = runnable_state()
    q_labels, k_labels = settings.labels(cfg)
    if cfg["mask"] == "custom":
        mask_editor(cfg, q_labels, k_labels)
    prepared = checked(cfg)
    if isinstance(prepared, SpecError):
        refused(cfg, prepared)
        st.stop()
    return cfg, prepared.spec, q_labels, k_labels


def refused(cfg: dict, error: SpecError) -> None:
    """The main area's line for a configuration that cannot run: what is wrong, in its first sentence
    (the sidebar gives the whole message beside the control; the walk found the two repeating each
    other), and for a run over the memory budget the largest length that fits, one click away."""
    what = re.split(r"(?<=[.!?])\s+(?=[A-Z])", str(error), maxsplit=1)[0]
    st.warning(
        f"Nothing to draw yet — {escape_markdown(what)} The sidebar says what to change, next to the control.",
        icon=":material/tune:",
    )
    fits = 0
    if isinstance(error, BudgetError) and cfg["input"] != "sentence":
        fits = settings.largest_fitting_length(settings.build_spec(cfg), settings.APP_MEMORY_BUDGET)
    if fits:
        session.button(
            f"Use len_q = len_kv = {fits}",
            key="config.fit_length",
            on_click=_use_length,
            args=(fits,),
            help="The largest length that fits this app's memory budget with the other settings unchanged.",
        )


def _use_length(n: int) -> None:
    st.session_state["len_q"] = n
    st.session_state["len_kv"] = n


RUN_CACHE, TIMING_CACHE, COMPARISON_CACHE = "explorer run", "steady timing", "comparison"
TIMING_TTL_S = 600  # a steady-state time is measured again after ten minutes without use


def run_key(cfg: dict, framework: str | None = None) -> tuple[str, str, str]:
    """The cache key of `run(cfg, framework)` (download buttons keep it, not the arrays)."""
    return settings.canonical(cfg), framework or cfg["framework"], cfg["device"]


def ready(cfg: dict) -> bool:
    """Whether `run(cfg)` would draw at once: its result is cached, or a worker has its framework
    loaded (until then the explorer draws its reference preview first)."""
    return loading.loaded(cfg["framework"]) or door.cached(RUN_CACHE, *run_key(cfg), shared=True)[0]


def run(cfg: dict, framework: str | None = None) -> AttentionResult:
    """The configuration's recorded run in `framework` (default: the chosen one), from the server's
    cache or a worker. Every session gets the cached result itself, its arrays read-only (no copy per
    rerun; a change raises instead of reaching another session). What ended it without a value is
    said on the page, which stops there."""
    key = run_key(cfg, framework)
    return _ask(tasks.explorer_run, key, key[1:2], RUN_CACHE, f"Running {label(key[1])}")


def run_and_timing(cfg: dict) -> tuple[AttentionResult, Timing]:
    """`run(cfg)` and `timing(cfg)` (the explorer's), in one worker round trip when neither is cached
    (`tasks.explorer_run_timed`: the configuration parsed and its inputs built once there); either
    alone when only the other is cached. Draws one empty slot either way, as `door.run` does, so the
    elements below keep their places from run to run."""
    key = run_key(cfg)
    if door.cached(RUN_CACHE, *key, shared=True)[0] or door.cached(TIMING_CACHE, *key, shared=True)[0]:
        st.empty()
    else:
        both = _ask(tasks.explorer_run_timed, key, key[1:2], None, f"Running {label(key[1])}")
        door.keep(RUN_CACHE, key, {}, both[0], ttl=results.DEFAULT_TTL_S, shared=True)
        door.keep(TIMING_CACHE, key, {}, both[1], ttl=TIMING_TTL_S, shared=True)
    return run(cfg), timing(cfg)


def cached_run(*key: str) -> AttentionResult:
    """`run` by its `run_key` (a download's data, built on click: from the cache, else a worker)."""
    hit, value = door.cached(RUN_CACHE, *key, shared=True)
    if hit:
        return value
    return ex.submit(tasks.explorer_run, *key).result(timeout=ex.Limits.from_env().seconds)


def compare(cfg: dict) -> Comparison:
    """The PyTorch-vs-TensorFlow comparison of the configuration (steps reduced to their rows)."""
    key = (settings.canonical(cfg), cfg["device"])
    return _ask(tasks.comparison, key, tuple(FRAMEWORKS), COMPARISON_CACHE, "Running both frameworks")


def timing(cfg: dict, framework: str | None = None) -> Timing:
    """The steady-state forward time (`attnviz.run.time_attention`) of exactly what `run(cfg)` computes.

    Same spec, inputs and parameters (interpretable heads included); cached for ten minutes.
    """
    key = run_key(cfg, framework)
    spinner = "Timing the forward pass"
    return _ask(tasks.steady_timing, key, key[1:2], TIMING_CACHE, spinner, ttl=TIMING_TTL_S)


def _ask(
    task,
    key: tuple,
    frameworks: tuple[str, ...],
    cache: str | None,
    spinner: str,
    ttl: float = results.DEFAULT_TTL_S,
):
    """`door.run(task, *key)` kept in the result cache under `cache` (None: not kept) and shared
    read-only; on a failure the page says why (`door.show_failure`: the field and what is allowed, or
    the worker's fate with Run again) and stops there."""
    try:
        # quick: the explorer's, the steps' and the comparison's runs take milliseconds in a worker
        value = door.run(task, *key, spinner=spinner, cache=cache, ttl=ttl, shared=True, quick=True)
    except (ex.TaskError, SpecError) as error:
        door.show_failure(error, key=f"runs.again.{cache or task.__name__}")
        st.stop()
    loading.mark_loaded(*frameworks)
    return value
