"""Runs of the configuration: checked once per configuration, computed once per server (cached).

`checked(cfg)` is the one place a configuration is validated and its inputs (and
interpretable heads) are built; the sidebar's error, the page's spec and the
cached runs all read it, so a rerun checks and builds once. Results live in the
server's one byte-bounded cache (`attnviz.app.frame.results`).

These runs stay in the server process, not in the execution layer's workers
(`attnviz.app.frame.door` says where the line is): at the sidebar's default (L = 8) a
recorded run takes a few milliseconds and its steady-state time well under 0.2 s, and at
the largest sizes the sidebar allows (512 × 512, 16 heads) the recorded result — every
step's arrays — is about as large as the work that makes it, so shipping it back from a
worker would cost about what computing it here does. They are the pages a bystander
waits on while others train: in the server they run at its priority, ahead of the
workers (`ATTNVIZ_WORKER_NICE`), rather than queued behind trainings for a worker. Each is
refused before it runs when its estimate is over the per-run budget (`settings.check_fits`).
"""

from __future__ import annotations

import json
import re

import streamlit as st

from attnviz import settings
from attnviz.app.frame import results
from attnviz.app.frame.literal import escape_markdown
from attnviz.app.frame.loading import load_framework
from attnviz.app.sidebar.mask_editor import mask_editor
from attnviz.app.sidebar.url import runnable_state
from attnviz.cache import MIB, ByteCache
from attnviz.compare import Comparison, compare_frameworks
from attnviz.errors import BudgetError, SpecError
from attnviz.frameworks import FRAMEWORKS
from attnviz.result import AttentionResult
from attnviz.run import Timing, run_attention, time_attention

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
        st.button(
            f"Use len_q = len_kv = {fits}",
            key="config.fit_length",
            on_click=_use_length,
            args=(fits,),
            help="The largest length that fits this app's memory budget with the other settings unchanged.",
        )


def _use_length(n: int) -> None:
    st.session_state["len_q"] = n
    st.session_state["len_kv"] = n


def _prepared(cfg_json: str) -> settings.Prepared:
    prepared = checked(json.loads(cfg_json))
    if isinstance(prepared, SpecError):
        raise prepared
    return prepared


@results.bounded("explorer run")
def _run(cfg_json: str, framework: str, device: str) -> AttentionResult:
    spec, x_q, x_kv, params = _prepared(cfg_json)
    load_framework(framework)
    return run_attention(spec, framework, device, x_q=x_q, x_kv=x_kv, params=params)


@results.bounded("comparison", spinner="Running both frameworks…")
def _compare(cfg_json: str, device: str) -> Comparison:
    spec, x_q, x_kv, params = _prepared(cfg_json)
    for fw in FRAMEWORKS:
        load_framework(fw)
    return compare_frameworks(spec, device, x_q=x_q, x_kv=x_kv, params=params)


@results.bounded("steady timing", ttl=600, spinner="Timing the forward pass…")
def _timing(cfg_json: str, framework: str, device: str) -> Timing:
    spec, x_q, x_kv, params = _prepared(cfg_json)
    load_framework(framework)
    return time_attention(spec, framework, device, x_q=x_q, x_kv=x_kv, params=params)


def run_key(cfg: dict, framework: str | None = None) -> tuple[str, str, str]:
    """The cache key of `run(cfg, framework)` (download buttons keep it, not the arrays)."""
    return settings.canonical(cfg), framework or cfg["framework"], cfg["device"]


def run(cfg: dict, framework: str | None = None) -> AttentionResult:
    """The cached result of the configuration in `framework` (default: the chosen one).

    Each call returns its own copy, so no session changes another's.
    """
    return _run(*run_key(cfg, framework))


def cached_run(*key: str) -> AttentionResult:
    """`run` by its `run_key` (for callbacks that must not hold the result)."""
    return _run(*key)


def compare(cfg: dict) -> Comparison:
    """The cached PyTorch-vs-TensorFlow comparison of the configuration."""
    return _compare(settings.canonical(cfg), cfg["device"])


def timing(cfg: dict, framework: str | None = None) -> Timing:
    """The steady-state forward time (`attnviz.run.time_attention`) of exactly what `run(cfg)` computes.

    Same spec, inputs and parameters (interpretable heads included); cached for ten minutes.
    """
    return _timing(*run_key(cfg, framework))
