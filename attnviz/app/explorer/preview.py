"""The explorer's first chart before a worker has its framework loaded: the float64 NumPy reference,
labelled.

A server's first visitor would otherwise wait for a worker to start and import PyTorch (or
TensorFlow) before seeing anything. The reference (`attnviz.reference`) computes the same weights
from the same inputs and parameters in NumPy, in the server (no framework there); it is drawn, said
to be the reference, the framework's run goes to a worker under a progress bar, and the page reruns
with the framework's own result.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from attnviz import masks, reference
from attnviz.app.frame.loading import import_shared_modules
from attnviz.app.sidebar import runs
from attnviz.frameworks import label
from attnviz.params import init_params, make_inputs
from attnviz.plots import heatmaps


def reference_weights(cfg: dict) -> np.ndarray:
    """`(B, H, Lq, Lk)` float64 weights of the configuration, from `attnviz.reference`.

    The same spec, inputs and parameters `runs.run(cfg)` uses (interpretable heads included).
    """
    spec, x_q, x_kv, params = runs.checked(cfg)
    if x_q is None:
        x_q, x_kv = make_inputs(spec)
    x_kv = x_q if x_kv is None else x_kv
    return reference.multi_head_attention(spec, params or init_params(spec), x_q, x_kv)["softmax"]


def draw_then_run(cfg: dict, q_labels: list[str], k_labels: list[str]) -> None:
    """Draw the reference's heads, run the configuration in a worker (its progress shown), rerun.
    Does not return (a failed run is said in its place, and the page stops)."""
    framework = cfg["framework"]
    spec = runs.checked(cfg).spec
    allowed = masks.from_spec(spec)
    st.info(
        f"Preview from attnviz's NumPy float64 reference while a {label(framework)} worker starts (once "
        "per server): the same inputs and weights; the page redraws with the framework's own run.",
        icon=":material/hourglass_top:",
    )
    st.plotly_chart(
        heatmaps.head_grid(
            reference_weights(cfg)[0],
            q_labels,
            k_labels,
            blocked=None if allowed is None else ~allowed[0],
        ),
        width="stretch",
        key="explorer.preview",
        config={"displayModeBar": False},
    )
    runs.run_and_timing(cfg)
    # pandas (0.3-0.5 s, for the rerun's tables), not before the chart above nor while the browser is
    # still fetching plotly.js to draw it (an import holds the interpreter that serves those files)
    import_shared_modules()
    st.rerun()
