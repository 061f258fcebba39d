"""attnviz — `streamlit run app.py`. Routes over pages/ and draws the shared configuration."""

import streamlit as st

from attnviz.ui import controls, link_values
from attnviz.ui.pages import PAGES, by_title
from attnviz.ui.routing import mark_routed

st.set_page_config(page_title="attnviz", page_icon=":material/visibility:", layout="wide")
page = st.navigation(
    [st.Page(p.path, title=p.title, icon=p.icon, default=i == 0) for i, p in enumerate(PAGES)]
)
info = by_title(page.title)
link_values.guard(info.path)  # before any widget reads a number from the link
controls.sidebar(info)
link_values.show(info.path)
mark_routed()  # the page's ensure_navigation() sees it ran under app.py
page.run()
