"""PyTorch vs TensorFlow: the same parameters and inputs, compared at every step."""

import streamlit as st

from attnviz.app import controls
from attnviz.app.frame.pages import by_name
from attnviz.app.frame.shell import routed
from attnviz.compare import tolerance_units
from attnviz.frameworks import FRAMEWORKS, label
from attnviz.plots import heatmaps
from attnviz.plots.labels import duration

routed("compare")  # inside app.py's shell, also when Streamlit's pages/ routing ran this file alone
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
(st.success if comparison.agree else st.error)(comparison.verdict())
if comparison.excluded:
    st.caption(
        "Dropout is active in training mode: each framework draws its own random dropout mask, so the "
        "steps from dropout on are marked “not compared” below. Turn training off to compare every step."
    )

with st.container(horizontal=True, gap="small", key="compare.metrics"):  # two a row on a phone
    for fw in ("torch", "tensorflow"):
        run = getattr(comparison, fw)
        st.metric(f"{label(fw)} forward", duration(comparison.median_s[fw]), help=run.device_name, width=165)
    st.metric(
        "Tolerance",
        f"{comparison.tolerance:.0e}",
        help="max |TF − PyTorch| / max |PyTorch|, per step",
        width=130,
    )
threads = {fw: t.threads for fw, t in comparison.timings.items()}
st.caption(
    "Forward time: steady state — the median of warm calls of each framework's fast path (no step capture), "
    "after warm-up calls, on the same inputs and weights (`attnviz.run.time_attention`, the measurement "
    "`python -m attnviz.bench` makes; "
    + ", ".join(f"{label(fw)} {n} thread{'s' if n != 1 else ''}" for fw, n in threads.items())
    + (")." if len(set(threads.values())) == 1 else "; different thread counts, so not comparable).")
    + " Framework start-up is not included. What the numbers include: both layers run eagerly, one "
    "operation after another (projections, head split, scores, scaling, mask, softmax, weighted sum, merge, "
    "output projection), plus copying the output and the weights to NumPy. At a small size nearly all of "
    "it is the framework's dispatch cost per operation, not arithmetic — and TensorFlow's eager dispatch "
    "costs much more per operation than PyTorch's. So these two numbers do not say which framework "
    "computes attention faster."
)
st.page_link(
    by_name("timing").path,
    label="Timing: the fair comparison",  # a link's label does not wrap: a longer one was cut at 390 px
    icon=":material/timer:",
    help="Compiled TensorFlow, each framework's own kernels, lengths up to 1024, on the Timing page",
)

st.subheader("Difference at every step")
st.dataframe(
    [
        {
            "step": r["step"],
            "shape": str(r["shape"]),
            "max |Δ|": f"{r['max_abs']:.3e}",
            "relative": f"{r['rel']:.3e}",
            "within tolerance": "not compared (after dropout)"
            if not r["compared"]
            else ("yes" if r["agree"] else "NO"),
        }
        for r in comparison.rows
    ],
    hide_index=True,
    width="stretch",
    height=controls.table_height(len(comparison.rows)),
)
b = controls.batch_item(spec)
units = tolerance_units(comparison, b)
st.caption(
    f"Attention weights (before dropout), batch item {b}, one panel per head: each cell is "
    "|TensorFlow − PyTorch| ÷ (tolerance × the largest PyTorch weight) — the verdict's relative error, "
    f"cell by cell. 1 is the tolerance ({comparison.tolerance:.0e}); a cell at or above it is the darkest "
    f"red, and white is agreement. The largest cell here is {units.max():.2g} of the tolerance."
)
st.plotly_chart(
    heatmaps.head_grid(units, q_labels, k_labels, colorscale="Reds", zmax=1.0, value_name="|Δ| ÷ tolerance"),
    width="stretch",
    key="compare.diff",
)
