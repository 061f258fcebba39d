"""Keep every page under app.py's `st.navigation`, even on a deep link.

Streamlit treats an app with a `pages/` folder as a legacy (v1) multipage app
until some run calls `st.navigation`: a shared link such as `/explorer`
opened first after a server start would run `pages/explorer.py` on its own,
with the legacy file-name menu and without app.py's page setup. Every page
calls `ensure_navigation()` first; in that case it switches the process to
`st.navigation` routing (what `st.navigation` itself does) and reruns, so
app.py routes the same URL.
"""

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager


def ensure_navigation() -> None:
    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()
