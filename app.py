"""attnviz — `streamlit run app.py`. Routes over pages/; nothing else."""

import streamlit as st

st.set_page_config(page_title="attnviz", page_icon="🔍", layout="wide")
st.navigation([st.Page("pages/home.py", title="Home", icon="🏠", default=True)]).run()
