"""Issue 42 point 4: the explorer's, the steps' and the comparison's runs go to a worker; where no
worker can run them (none starts, it dies, its framework is missing there) the page says so plainly,
and the rest of the app works. The engine is replaced by one whose every task has already failed, so
no worker starts here."""

from __future__ import annotations

import copy
from types import SimpleNamespace

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


@pytest.fixture
def in_process(monkeypatch):
    """Every task submitted from now on runs at once in this process; the list names them in order."""
    submitted = []

    def submit(task, *args, limits=None, training=False, quick=False, **kwargs):
        submitted.append(task.__name__)
        handle = ex.Handle(task.__qualname__, ex.Limits())
        handle._finish(task(*args, **kwargs), None)
        return handle

    monkeypatch.setattr(ex, "submit", submit)
    return submitted


def test_an_explorer_rerun_asks_a_worker_once_and_copies_nothing(in_process, monkeypatch):
    """Issue 42 point 2 (issue 41 point 4): a new configuration's run and its timing are one round trip;
    a rerun of it checks nothing again, submits nothing, copies nothing (every session reads the
    cached result itself, its arrays read-only) and builds no figure again (the same heads drawn)."""
    from attnviz import settings
    from attnviz.app.frame import door, results
    from attnviz.app.sidebar import runs

    at = open_page("explorer", {"seed": "424203"})  # a configuration no other test caches
    runs_asked = [t for t in in_process if t != "gpu_available"]  # the GPU question: once per server
    assert runs_asked == ["explorer_run_timed"], "the run and its timing in one round trip"
    asked = len(in_process)
    from attnviz.plots import heatmaps

    calls = {"check": 0, "deepcopy": 0, "head_grid": 0, "matrix": 0}

    def counted(name, fn):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(settings, "check", counted("check", settings.check))
    for name in ("head_grid", "matrix"):
        monkeypatch.setattr(heatmaps, name, counted(name, getattr(heatmaps, name)))
    copies = SimpleNamespace(deepcopy=counted("deepcopy", copy.deepcopy))  # the result cache's copies
    monkeypatch.setattr(door, "copy", copies)
    monkeypatch.setattr(results, "copy", copies)
    at.run()
    assert_clean(at)
    assert [m.label for m in at.metric][:1] == ["Framework"], "the run's figures drawn"
    assert len(in_process) == asked, f"nothing submitted again: {in_process[asked:]}"
    assert calls == {"check": 0, "deepcopy": 0, "head_grid": 0, "matrix": 0}, calls
    key = runs.run_key(dict(settings.DEFAULTS, seed=424203))
    first, again = (door.cached(runs.RUN_CACHE, *key, shared=True)[1] for _ in range(2))
    assert first is again and not first.weights.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        first.weights[...] = 0
