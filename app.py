"""attnviz — `streamlit run app.py`. Routes over the screens (attnviz/app/<name>/page.py) and draws the
shared configuration.

There is no `pages/` folder beside this file, so Streamlit routes every URL through this script,
a first deep link (`/explorer?n_heads=2`) after a server start included: it decides legacy (v1)
multipage routing once, by whether `pages/` exists (`PagesManager.uses_pages_directory`).

Streamlit runs this file as `__main__` (its script module's `__file__` is this path), so a worker
process of `attnviz.exec`, started with `spawn`, imports this file as `__mp_main__`: the guard keeps
the worker from drawing the app, and the imports inside `main` keep it from importing Streamlit.
"""


def main() -> None:
    import streamlit as st

    from attnviz.app import controls
    from attnviz.app.frame import door, keras_session, link_values
    from attnviz.app.frame.pages import PAGES, by_title

    keras_session.keep()  # Streamlit would clear Keras's session after every run (0.3 s; the module says why)
    st.set_page_config(page_title="attnviz", page_icon=":material/visibility:", layout="wide")
    page = st.navigation(
        [
            st.Page(p.path, title=p.title, icon=p.icon, url_path=p.name, default=i == 0)
            for i, p in enumerate(PAGES)
        ]
    )
    info = by_title(page.title)
    link_values.guard(info.name)  # before any widget reads a number from the link
    controls.sidebar(info)
    link_values.show(info.name)
    page.run()
    door.warm()  # once per server: the workers start (and import PyTorch) after the first page is drawn


if __name__ == "__main__":
    main()
