"""The Streamlit app: one folder per screen, and the two folders every screen shares.

`app.py` (the entrypoint) routes `frame.pages.PAGES`: each screen's page is `pages/<name>.py` at the
repository's top (a thin Streamlit script run top to bottom, served at `/<name>`); its folder here
holds what only that screen uses — its state and URL binding (`state.py`), its cached work
(`work.py`), the tasks a worker runs for it (`tasks.py`: no Streamlit), its figures (`figures.py`).
What every screen shares:

- `frame/`    the shell (`shell.py`: navigation, link guard, sidebar, the page), the pages list,
              link notes and the link-number guard, session liveness, framework loading, the
              server's result cache, the door to the workers, small widgets
- `sidebar/`  the shared attention configuration: its widgets, URL state, runs and downloads
- `controls`  what a screen uses from both, in one import

Nothing below `attnviz/app/` imports Streamlit; importing this package imports nothing.
"""
