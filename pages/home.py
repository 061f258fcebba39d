"""Home: what attention is, and where each page helps."""

from pathlib import Path

import streamlit as st

from attnviz.ui.routing import ensure_navigation

ensure_navigation()
st.title("attnviz — see how attention works")
st.markdown(
    "Attention lets every **query** position look at every **key** position and take a "
    "weighted mix of their **values**. attnviz computes it with its own code, written the "
    "textbook way in **PyTorch and TensorFlow**, records every step, and shows it."
)
st.latex(r"\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^{\top}}{\sqrt{d_k}} + M\right) V")
st.markdown(
    "$Q = x_q W_Q$, $K = x_{kv} W_K$, $V = x_{kv} W_V$. The mask $M$ is $0$ where a query may "
    "attend and $-\\infty$ where it may not, so blocked keys get weight exactly 0. "
    "**Multi-head** attention splits the projections into $H$ heads of width $d_k$ "
    "(and $d_v$), runs this in each head, concatenates the heads and projects with $W_O$."
)
st.image(
    str(Path(__file__).parent.parent / "assets" / "pipeline.svg"),
    caption="The pipeline attnviz records, step by step",
    width="stretch",
)

st.subheader("Pages")
c1, c2, c3 = st.columns(3)
with c1:
    st.page_link("pages/explorer.py", label="Multi-head explorer", icon=":material/grid_view:")
    st.caption("All heads' heatmaps at once, per-head summaries, the shape of every step, downloads.")
with c2:
    st.page_link("pages/steps.py", label="Step by step", icon=":material/stairs:")
    st.caption(
        "One head's pipeline, one matrix at a time, with the PyTorch and TensorFlow code "
        "side by side — and the four mask conventions that trip people up."
    )
with c3:
    st.page_link("pages/compare.py", label="PyTorch vs TensorFlow", icon=":material/balance:")
    st.caption(
        "The same weights and inputs in both frameworks: the difference at every step, "
        "and a verdict against the float32 tolerance."
    )
st.info(
    "Your settings (sidebar) follow you from page to page and live in the URL: copy it to share the view."
)
