"""Home: what attention is, and where each page helps."""

from pathlib import Path

import streamlit as st

from attnviz.app.frame.pages import PAGES, by_name
from attnviz.app.frame.shell import routed

routed("home")  # inside app.py's shell, also when Streamlit's pages/ routing ran this file alone
st.title("attnviz — see how attention works")
st.page_link(by_name("lesson").path, label="New here? Start with the lesson", icon=":material/school:")
st.markdown(
    "Attention lets every **query** position look at every **key** position and take a "
    "weighted mix of their **values**. attnviz computes it with its own code, written the "
    "textbook way in **PyTorch and TensorFlow**, records every step, and shows it."
)
# Two short lines, so the formula fits a phone's width (390 px) instead of being cut off.
st.latex(
    r"\begin{aligned} \mathrm{Attention}(Q, K, V) &= \mathrm{softmax}(S)\, V, \\"
    r" S &= \frac{QK^{\top}}{\sqrt{d_k}} + M \end{aligned}"
)
st.markdown(
    "$S$ holds one score per query and key. $Q = x_q W_Q$, $K = x_{kv} W_K$, $V = x_{kv} W_V$. The mask $M$ is $0$ where a query may "
    "attend and $-\\infty$ where it may not, so blocked keys get weight exactly 0. "
    "**Multi-head** attention splits the projections into $H$ heads of width $d_k$ "
    "(and $d_v$), runs this in each head, concatenates the heads and projects with $W_O$."
)
# Three parts side by side; on a phone Streamlit stacks the columns, so each part is drawn at the
# screen's width and its labels stay readable (one 900-px-wide diagram shrank to 5-px text at 390 px).
assets = Path(__file__).parents[1] / "assets"  # the repository's assets/, beside app.py
for column, part in zip(st.columns(3), ("1-project", "2-weights", "3-output"), strict=True):
    column.image(str(assets / f"pipeline-{part}.svg"), width="stretch")
st.caption("The pipeline attnviz records, step by step")

st.subheader("Pages")
pages = [p for p in PAGES if p.name != "home"]
for row in range(0, len(pages), 3):
    for column, info in zip(st.columns(3), pages[row : row + 3], strict=False):
        with column:
            st.page_link(info.path, label=info.title, icon=info.icon)
            st.caption(info.blurb)
st.info(
    "Your settings (sidebar) follow you from page to page and live in the URL: copy it to share the view. "
    "Back and Forward move between pages, each with its settings."
)
