"""The shell every screen runs in: the navigation over `pages/`, the link guard and the shared
sidebar, then the screen's own script (`pages/<name>.py`). app.py calls `run`; each page script
opens with `routed("<name>")`.

Why a page opens with `routed`. Streamlit decides, when a process's first session starts, whether
the app is a legacy (v1) multipage app: it is when a `pages/` folder sits beside the entrypoint
(`PagesManager.uses_pages_directory`, read in Streamlit 1.67's `runtime/pages_manager.py`; AppTest
decides again before each of its runs). Then that run does not run app.py: Streamlit builds its own
navigation from the folder (`script_runner._mpa_v1`) and runs the page the URL names — a first deep
link such as `/explorer?n_heads=2&mask=causal` would run `pages/explorer.py` alone, without the
navigation, the link guard or the shared sidebar. Calling `st.navigation` ends that mode for the
process (it sets the flag to False: `commands/navigation.py`), so every later run goes through app.py.

`routed` uses that, with public calls only: run by the shell (this module's `run` is on the stack),
it returns at once; run by Streamlit's legacy routing, it draws the shell's part before the page
(`frame`: `st.navigation` with the app's pages — the end of legacy routing — the link guard, the
sidebar). Then, on a live server, it runs the page the navigation resolved (`page.run()`, as `run`
does) and ends the legacy run (`st.stop()`). It must: `st.navigation` sets the active script hash to
the entrypoint's, and Streamlit 1.67 puts the active script hash in every widget's id
(`elements/lib/utils.py`); `page.run()` runs the page under the page's own hash, as every later run
does. Were the page to go on in the legacy run, its widgets would be new widgets on the next run
(URL-bound values reseeded from the link: a value a callback set — a heatmap click choosing a cell —
lost on the first interaction after a deep link), and a click that is itself a restarted server's
first run (a tab left open across a restart) would name a widget id the legacy run never drew. A
rerun instead would drop that click's trigger. Under AppTest (a stand-in runtime, `door.serving()`
False; it decides legacy routing before each of its runs, so every run of a page takes this way and
the hash never changes) the page script goes on as the page in the same run. Should a release stop
routing a `pages/` folder by itself, `routed` simply always returns (tests/browser/test_pages.py
opens each screen's first deep link on a freshly started server, and clicks the Lesson's Next and the
explorer's hand-built heads after a restart under the open tab — a reconnected tab asks for no run,
so each click is the restarted server's first run; tests/browser/test_interpret_parts.py clicks a
cell right after a deep link).
"""

from __future__ import annotations

import contextvars

import streamlit as st

from attnviz.app import controls
from attnviz.app.frame import door, keras_session, link_values, session
from attnviz.app.frame.pages import PAGES, by_title

_RUNNING: contextvars.ContextVar[str | None] = contextvars.ContextVar("attnviz_shell", default=None)


def run() -> None:
    """One run of the app: the workers warmed (once per server: they start before the first page, at
    a lower priority, so its runs find them), the shell's part before the page (`frame`), the page."""
    door.warm()
    page = frame()
    token = _RUNNING.set(page.url_path)
    try:
        page.run()
    finally:
        _RUNNING.reset(token)


def frame():
    """The navigation over `PAGES` (each `pages/<name>.py` at `/<name>`, Home the default), the link
    guard and the shared sidebar; the `st.Page` the link names. First, before any widget, the callback
    of a click Streamlit dropped in the previous run (`widgets.replay`: a restarted server's tab)."""
    session.replay()
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
    return page


def routed(name: str) -> None:
    """A page script's first line: nothing when the shell runs it; when Streamlit's legacy `pages/`
    routing ran the script alone (a server's first request, every AppTest run), the shell's part
    before the page (`frame`), after which the script goes on as the page. `name`: the page's row in
    `PAGES` and its file's name (tests/test_house.py checks they agree); `st.navigation` finds the row
    by the URL, which is the same. That first run also warms the workers first (`door.warm`, once per
    server, as app.py's runs do): a first deep link must start them as app.py's first page does, or a
    worker killed under a task would not come back until the next task asked for one."""
    if _RUNNING.get() is None:
        door.warm()
        page = frame()
        if door.serving():  # the page under its own script hash, as in every later run (the module says why)
            token = _RUNNING.set(page.url_path)
            try:
                page.run()
            finally:
                _RUNNING.reset(token)
            st.stop()
