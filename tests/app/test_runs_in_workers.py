"""Issue 42 point 4: the explorer's, the steps' and the comparison's runs go to a worker; where no
worker can run them (none starts, it dies, its framework is missing there) the page says so plainly,
and the rest of the app works. The engine is replaced by one whose every task has already failed, so
no worker starts here."""

from __future__ import annotations

import pytest

from attnviz import exec as ex
from attnviz.exec.outcome import failure
from attnviz.frameworks import backend
from tests.app.conftest import assert_clean, errors, open_page, plain

FAILURES = {
    "worker stopped": (
        ex.WorkerStopped(-9),
        "The run did not finish: the worker stopped (signal 9, SIGKILL)",
    ),
    "no worker": (ex.NoWorker(120), "no worker was free within 120 s"),
    "cannot start": (failure(OSError("[Errno 11] Resource temporarily unavailable")), "The run failed: "),
}


def _not_installed() -> ex.TaskError:
    """What a worker without TensorFlow answers: the library's own SpecError, as data."""
    backend.cache_clear()
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr("attnviz.frameworks.is_installed", lambda name: False)
            backend("tensorflow")
    except Exception as error:
        return failure(error)
    finally:
        backend.cache_clear()
    raise AssertionError("backend() accepted a framework that is not installed")


@pytest.fixture
def failing(monkeypatch):
    """Every task submitted from now on ends at once with the error `set(error)` names."""
    chosen = {}

    def submit(task, *args, **kwargs):
        handle = ex.Handle(task.__qualname__, ex.Limits())
        handle._finish(None, chosen["error"])
        return handle

    monkeypatch.setattr(ex, "submit", submit)
    return chosen


@pytest.mark.parametrize("kind", list(FAILURES))
def test_the_explorer_says_why_its_run_did_not_come_back(failing, kind):
    error, said = FAILURES[kind]
    failing["error"] = error
    at = open_page("explorer", {"seed": "424201"})  # a configuration no other test caches
    assert_clean(at)
    assert said in errors(at)
    buttons = [b.label for b in at.main.button]
    assert ("Run again" in buttons) == (kind != "cannot start"), buttons  # where trying again may help
    assert not at.metric, "no framework's figures in place of the run"


def test_a_framework_missing_in_the_worker_is_named_with_how_to_install_it(failing):
    failing["error"] = _not_installed()
    at = open_page("compare", {"seed": "424202"})
    assert_clean(at)
    text = errors(at)
    assert "framework" in text and "attnviz[tensorflow]" in text, text
    home = open_page("home")
    assert_clean(home)
    assert any("see how attention works" in plain(t.value) for t in home.title), "the rest of the app works"
