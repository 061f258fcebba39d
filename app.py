"""attnviz — `streamlit run app.py`. Routes over pages/; nothing else."""

import streamlit as st

st.set_page_config(page_title="attnviz", page_icon=":material/visibility:", layout="wide")
PAGES = [
    st.Page("pages/home.py", title="Home", icon=":material/home:", default=True),
    st.Page("pages/explorer.py", title="Multi-head explorer", icon=":material/grid_view:"),
    st.Page("pages/steps.py", title="Step by step", icon=":material/stairs:"),
    st.Page("pages/compare.py", title="PyTorch vs TensorFlow", icon=":material/balance:"),
    st.Page("pages/pretrained.py", title="Pretrained model", icon=":material/psychology:"),
    st.Page("pages/timing.py", title="Timing", icon=":material/timer:"),
]
st.navigation(PAGES).run()
