"""Download buttons for a run: the configuration as JSON, every step as .npz, the weights as CSV."""

from __future__ import annotations

import streamlit as st

from attnviz.app.sidebar.runs import cached_run, run_key
from attnviz.app.sidebar.url import runnable_state
from attnviz.result import AttentionResult, config_json, steps_npz, weights_csv


def downloads(spec, result: AttentionResult, q_labels: list[str], k_labels: list[str]) -> None:
    """Configuration as JSON, every step as .npz, the weights as CSV (built on click).

    The buttons keep the result's cache key, not the result: a session's download
    buttons live as long as the session, and holding each session's arrays there
    kept ~70 MB per closed tab of a large configuration alive (live-server memory test).
    """
    key = run_key(runnable_state(), result.framework)  # as run(cfg) was called
    d1, d2, d3 = st.columns(3)
    extra = {"framework": result.framework, "device": result.device}
    d1.download_button(
        "⬇ Configuration (JSON)",
        lambda: config_json(spec, **extra),
        "attnviz-config.json",
        "application/json",
        on_click="ignore",
    )
    d2.download_button(
        "⬇ All steps (.npz)",
        lambda: steps_npz(cached_run(*key)),
        "attnviz-steps.npz",
        "application/octet-stream",
        on_click="ignore",
    )
    d3.download_button(
        "⬇ Weights (CSV)",
        lambda: weights_csv(cached_run(*key), q_labels, k_labels),
        "attnviz-weights.csv",
        "text/csv",
        on_click="ignore",
    )
