"""attnviz — `streamlit run app.py`: the navigation over `pages/` (one thin script per screen, served
at `/<name>`) and the shared sidebar, drawn by `attnviz.app.frame.shell.run`.

A first deep link on a fresh server (`/explorer?n_heads=2`) is routed by Streamlit's legacy `pages/`
handling before this file runs; each page's first line (`shell.routed`) then draws this same shell
before it (the module says why and how, with public calls only).

Streamlit runs this file as `__main__` (its script module's `__file__` is this path), so a worker
process of `attnviz.exec`, started with `spawn`, imports this file as `__mp_main__`: the guard keeps
the worker from drawing the app, and the import inside it keeps the worker from importing Streamlit.
"""

if __name__ == "__main__":
    from attnviz.app.frame import shell

    shell.run()
