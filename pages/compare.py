"""PyTorch vs TensorFlow: the same parameters and inputs, compared at every step."""

import streamlit as st

from attnviz import viz
from attnviz.compare import weight_differences
from attnviz.frameworks import FRAMEWORKS, label
from attnviz.ui import controls
from attnviz.ui.routing import ensure_navigation

ensure_navigation()
st.title("PyTorch vs TensorFlow")
st.caption(
    "The current configuration, run by attnviz's PyTorch and TensorFlow code on identical "
    "parameters and inputs."
)
missing = [fw for fw in FRAMEWORKS if fw not in controls.installed_frameworks()]
if missing:
    st.error(
        "This page needs both frameworks. Missing: "
        + "; ".join(f"{label(fw)} (`{FRAMEWORKS[fw].install_hint}`)" for fw in missing)
    )
    st.stop()
cfg, spec, q_labels, k_labels = controls.configure(framework_choice=False)
comparison = controls.compare(cfg)
worst = comparison.worst
if not comparison.comparable:
    st.warning(
        "Dropout is active in training mode: each framework draws its own random mask, so steps "
        "from dropout on are not expected to agree. Turn training off to compare them."
    )
if comparison.agree:
    st.success(
        f"Agree: every step within relative error {comparison.tolerance:.0e} ({spec.dtype}); "
        f"largest is {worst['rel']:.2e} at '{worst['step']}'."
    )
else:
    bad = [r["step"] for r in comparison.rows if not r["agree"]]
    st.error(f"Disagree at: {', '.join(bad)} (tolerance {comparison.tolerance:.0e}).")

t1, t2, t3 = st.columns(3)
for col, fw in ((t1, "torch"), (t2, "tensorflow")):
    run = getattr(comparison, fw)
    col.metric(f"{label(fw)} forward", f"{comparison.median_s[fw] * 1e3:.2f} ms", help=run.device_name)
t3.metric("Tolerance", f"{comparison.tolerance:.0e}", help="max |TF − PyTorch| / max |PyTorch|, per step")
st.caption(
    "Forward time: median of 5 eager calls without step capture, after the recorded run as warm-up "
    "(same inputs and weights). The Timing page compares against each framework's own kernels."
)

st.subheader("Difference at every step")
st.dataframe(
    [
        {
            "step": r["step"],
            "shape": str(r["shape"]),
            "max |Δ|": f"{r['max_abs']:.3e}",
            "relative": f"{r['rel']:.3e}",
            "within tolerance": r["agree"],
        }
        for r in comparison.rows
    ],
    hide_index=True,
    width="stretch",
    height=controls.table_height(len(comparison.rows)),
)
b = controls.batch_item(spec)
diff = weight_differences(comparison, b)
st.plotly_chart(
    viz.head_grid(
        diff,
        q_labels,
        k_labels,
        title=f"|TensorFlow − PyTorch| attention weights, batch item {b}",
        colorscale="Reds",
        value_name="|Δ|",
    ),
    width="stretch",
    key="compare.diff",
)
