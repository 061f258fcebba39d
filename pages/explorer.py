"""Multi-head explorer: every head's attention in one figure, summaries, the shape ledger."""

import streamlit as st

from attnviz import STEP_DOCS, viz
from attnviz.analysis import head_summary
from attnviz.frameworks import label
from attnviz.ui import controls
from attnviz.ui.routing import ensure_navigation

ensure_navigation()
st.title("Multi-head explorer")
cfg, spec, q_labels, k_labels = controls.configure()
result = controls.run(cfg)
b = controls.batch_item(spec)

m1, m2, m3, m4 = st.columns(4)
m1.metric("Framework", label(result.framework))
m2.metric("Device", result.device.upper(), help=result.device_name)
m3.metric(
    "Forward pass",
    f"{result.elapsed_s * 1e3:.2f} ms",
    help="Wall time of this one forward pass with every step recorded, device synchronised. A first call "
    "in a fresh server thread carries framework start-up; the Timing page measures steady state.",
)
m4.metric("Weights shape", " × ".join(map(str, result.weights.shape)))
if result.empty_rows[b].any():
    rows = controls.escape_markdown(", ".join(q_labels[i] for i in result.empty_rows[b].nonzero()[0][:20]))
    st.warning(f"Query rows with no allowed key (all weights 0, context 0): {rows}")

fig = viz.head_grid(
    result.weights[b],
    q_labels,
    k_labels,
    title=f"Attention weights, batch item {b} — rows: queries, columns: keys",
)
if fig.layout.meta["downsampled"] != [1, 1]:
    br, bc = fig.layout.meta["downsampled"]
    st.caption(f"Large configuration: each cell shows the mean of a {br} × {bc} block of weights.")
st.plotly_chart(fig, width="stretch", key="explorer.heads")

left, right = st.columns([3, 2])
with left:
    st.subheader("Per-head summary")
    st.dataframe(
        [
            {
                "head": r["head"],
                "entropy (nats)": round(r["entropy"], 3),
                "of max": f"{r['entropy'] / r['max_entropy']:.0%}" if r["max_entropy"] else "—",
                "max weight": round(r["max_weight"], 3),
                "looks most at": r["top_key"],
                "share": f"{r['top_key_share']:.0%}",
            }
            for r in head_summary(result.weights[b], k_labels)
        ],
        hide_index=True,
        width="stretch",
    )
    st.caption("Entropy near its maximum (log of the number of keys) = spread evenly; near 0 = focused.")
with right:
    st.subheader("Merged output")
    out = viz.matrix(result.output[b], q_labels, None, title="output (Lq, d_model)", value_name="value")
    st.plotly_chart(out, width="stretch", key="explorer.output")

st.subheader(f"Shape ledger — {label(result.framework)}")
st.dataframe(
    [
        {"step": s.name, "what": STEP_DOCS[s.name][0], "shape": str(s.shape), "code": s.code}
        for s in result.steps
    ],
    hide_index=True,
    width="stretch",
    height=controls.table_height(len(result.steps)),
)

controls.downloads(spec, result, q_labels, k_labels)
