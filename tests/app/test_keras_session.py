"""Keras's session is kept between script runs (attnviz.app.frame.keras_session): a run of the app,
with Keras imported, calls no `clear_session`; the rest of Streamlit's cleanup still happens; and
where Streamlit has no such hook the app runs as Streamlit runs it."""

from __future__ import annotations

import sys
import types

from streamlit.runtime.scriptrunner import script_runner

from attnviz.app.frame import keras_session
from tests.app.conftest import assert_clean, figures, open_page
from tests.conftest import requires


@requires("tensorflow")
def test_a_tensorflow_run_of_the_app_leaves_keras_session_alone(monkeypatch):
    import keras

    calls = []
    monkeypatch.setattr(keras.backend, "clear_session", lambda *a, **k: calls.append(a))
    at = open_page("explorer", {"framework": "tensorflow"})
    at.radio(key="framework").set_value("torch").run()
    at.radio(key="framework").set_value("tensorflow").run()
    assert_clean(at)
    assert figures(at)
    assert getattr(script_runner, keras_session.HOOK) is keras_session.clean_without_keras
    assert calls == []  # Streamlit's own cleanup would have called it after each of the three runs


def test_matplotlib_figures_are_still_closed_after_a_run(monkeypatch):
    closed = []
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", types.SimpleNamespace(close=closed.append))
    at = open_page("home")
    assert_clean(at)
    assert closed and set(closed) == {"all"}


def test_a_streamlit_without_the_hook_is_left_as_it_is(monkeypatch):
    """A release that no longer has `_clean_problem_modules`: `keep` says so and adds nothing."""
    monkeypatch.delattr(script_runner, keras_session.HOOK)
    assert keras_session.keep() is False
    assert not hasattr(script_runner, keras_session.HOOK)


def test_keep_replaces_streamlits_cleanup(monkeypatch):
    monkeypatch.setattr(script_runner, keras_session.HOOK, lambda: None)  # stands in for Streamlit's
    assert keras_session.keep() is True
    assert getattr(script_runner, keras_session.HOOK) is keras_session.clean_without_keras
