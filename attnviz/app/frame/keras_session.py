"""Keras's session kept between script runs: Streamlit clears it after every run, attnviz does not.

Streamlit's script runner ends each run with `_clean_problem_modules`. Where `keras` is imported, that
calls `keras.backend.clear_session()`, which resets Keras's global state (its layer-name counters),
drops TensorFlow's eager kernel cache and runs a full `gc.collect()`. In a server process holding
PyTorch, TensorFlow and transformers (about 515,000 objects tracked by the collector) the collection
alone takes 0.27 s of CPU, after every run of every visitor, and the next TensorFlow run rebuilds
its kernels (measured: docs/performance.md, "Keras's session"). It is meant for scripts that build
Keras models in a loop; attnviz's pages keep no Keras model between runs, so there is nothing for it
to free, and Python's own collector still runs as usual.

`keep()` (called by app.py before each run) replaces the function with one that does the rest of
Streamlit's cleanup — matplotlib's figures are still closed — and leaves Keras alone. Streamlit offers
no public switch: where a release no longer has the function, nothing is replaced, `keep()` returns
False and the app runs as Streamlit runs it.
"""

from __future__ import annotations

import sys

HOOK = "_clean_problem_modules"


def clean_without_keras() -> None:
    """Streamlit's cleanup after a run, less Keras's `clear_session`: close matplotlib's figures."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None:
        plt.close("all")


def keep() -> bool:
    """Install `clean_without_keras` as Streamlit's after-run cleanup (idempotent). False where this
    Streamlit has no such function (nothing changed)."""
    try:
        from streamlit.runtime.scriptrunner import script_runner as runner
    except ImportError:
        return False
    if not callable(getattr(runner, HOOK, None)):
        return False
    setattr(runner, HOOK, clean_without_keras)
    return True
