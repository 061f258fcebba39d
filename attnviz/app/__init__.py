"""The Streamlit app: one folder per screen, and the two folders every screen shares.

`app.py` (the entrypoint) routes `frame.pages.PAGES`: each screen is `attnviz/app/<name>/page.py`
(a Streamlit script run top to bottom, served at `/<name>`), beside the modules only that screen
uses — its state and URL binding (`state.py`), its cached work (`work.py`), its figures
(`figures.py`). What every screen shares:

- `frame/`    the shell: the pages list, link notes and the link-number guard, session liveness,
              framework loading, the server's result cache and run slots, small widgets
- `sidebar/`  the shared attention configuration: its widgets, URL state, runs and downloads
- `controls`  what a screen uses from both, in one import

Nothing below `attnviz/app/` imports Streamlit; importing this package imports nothing.
"""
