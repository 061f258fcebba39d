"""The server's bounds on training (issue 20 §1): the size refused before any allocation, and,
since trainings run in worker processes (issue 28), N+1 trainings at once refused by the execution
layer with the limit; `attnviz.app.frame.session` on both sides of Streamlit's non-public runtime API.
The same against a live server: tests/browser/test_training_limits.py. (The wall-time cap and a stop
keeping what was learned: tests/exec/test_tasks.py.)
"""

import types

import pytest

from attnviz import exec as ex
from attnviz import training as tr
from attnviz.app.frame import session
from attnviz.errors import BudgetError
from attnviz.training import schedule
from tests.exec import toy_tasks
from tests.exec.conftest import running

pytest.importorskip("torch")

TINY = tr.TrainConfig(steps=20, snapshot_every=10, batch=16, d_model=16)
LONG = TINY.replace(steps=5000, snapshot_every=250)
HOSTILE = tr.TrainConfig(
    task="copy",
    seq_len=64,
    vocab=256,
    n_layers=4,
    n_heads=8,
    d_model=256,
    batch=256,
    mlp=True,
    steps=5000,
    snapshot_every=250,
)  # fmt: skip — issue 20's hostile tab, at the step limit


def test_an_over_budget_run_is_refused_with_the_estimate_and_what_fits():
    with pytest.raises(BudgetError) as error:
        tr.check_size(HOSTILE, 1, tr.TrainLimits())
    text = str(error.value)
    size = tr.estimate(HOSTILE)
    assert f"{size.params:,} parameters × batch 256 × sequence 64" in text
    fits = int(text.split("a batch of at most ")[1].split()[0])
    assert tr.estimate(HOSTILE.replace(batch=fits)).work <= tr.TrainLimits().work
    assert tr.estimate(HOSTILE.replace(batch=fits + 1)).work > tr.TrainLimits().work or (
        tr.estimate(HOSTILE.replace(batch=fits + 1)).memory > tr.TrainLimits().memory_mb * 2**20
    )


def test_the_estimate_counts_parameters_batch_and_sequence():
    size = tr.estimate(TINY)
    params = sum(v.size for v in tr.init_params(TINY).values())
    assert size.params == params and size.work == params * TINY.batch * TINY.seq_len
    assert tr.estimate(TINY, 2).memory == 2 * size.memory
    assert tr.estimate(TINY.replace(batch=32)).memory > size.memory
    assert tr.estimate(TINY.replace(dtype="float64")).memory > size.memory


@pytest.mark.parametrize(
    ("limits", "config", "named"),
    [
        (tr.TrainLimits(steps=100), TINY.replace(steps=101), "ATTNVIZ_TRAIN_MAX_STEPS"),
        (
            tr.TrainLimits(snapshot_mb=1),
            TINY.replace(seq_len=64, steps=4000, snapshot_every=10),
            "snapshot_every",
        ),
        (tr.TrainLimits(memory_mb=1), TINY.replace(batch=1024), "ATTNVIZ_TRAIN_MB"),
    ],
)
def test_each_budget_is_checked(limits, config, named):
    with pytest.raises(BudgetError, match=named):
        tr.check_size(config, 1, limits)


def test_one_training_more_than_the_server_allows_gets_the_limit_message():
    """Budget(workers=3, trainings=2): the third training is refused at submit (nothing queued), naming
    the settings; once one ends, a training is accepted again."""
    engine = ex.LocalEngine(ex.Budget(workers=3, trainings=2))
    try:
        first = [ex.submit(schedule.train, LONG, ["torch"], engine=engine, training=True) for _ in range(2)]
        with pytest.raises(ex.Busy) as error:
            ex.submit(schedule.train, TINY, ["torch"], engine=engine, training=True)
        assert "ATTNVIZ_TRAIN_MAX_RUNS" in str(error.value) and error.value.field == "runs"
        assert (
            ex.submit(toy_tasks.add, 1, 2, engine=engine).result(timeout=120) == 3
        )  # a page's task still runs
        running(first[0])  # trained a turn: stopped now, it returns what it learned
        first[0].stop()
        assert first[0].result(timeout=120).ended == "stopped"
        third = ex.submit(schedule.train, TINY, ["torch"], engine=engine, training=True)  # a place came free
        assert third.result(timeout=120).runs["torch"].finished
        first[1].stop()
    finally:
        engine.close()


def test_bad_operator_settings_warn_and_keep_the_default(monkeypatch):
    monkeypatch.setenv("ATTNVIZ_TRAIN_MAX_STEPS", "lots")
    monkeypatch.setenv("ATTNVIZ_TRAIN_MAX_SECONDS", "0")
    monkeypatch.setenv("ATTNVIZ_TRAIN_SAVED_MB", "64")
    with pytest.warns(RuntimeWarning, match="ATTNVIZ_TRAIN_MAX_STEPS"):
        limits = tr.TrainLimits.from_env()
    assert limits.steps == tr.TrainLimits().steps and limits.seconds == tr.TrainLimits().seconds
    assert limits.saved_mb == 64


# -- attnviz.app.frame.session: Streamlit's runtime, and a release that lacks it ------------------------


class _Runtime:
    def __init__(self, active, state="ONE_OR_MORE_SESSIONS_CONNECTED"):
        from streamlit.runtime import RuntimeState

        self.active, self.state = active, RuntimeState[state]

    def is_active_session(self, session_id):
        return session_id in self.active


def _fake_runtime(monkeypatch, instance):
    from streamlit import runtime

    monkeypatch.setattr(runtime, "exists", lambda: True)
    monkeypatch.setattr(runtime, "get_instance", lambda: instance)


def test_session_alive_follows_the_runtime(monkeypatch):
    _fake_runtime(monkeypatch, _Runtime({"a"}))
    assert session.session_alive("a") and not session.session_alive("b")
    _fake_runtime(monkeypatch, _Runtime({"a"}, "STOPPING"))
    assert not session.session_alive("a")  # the server is shutting down


def test_a_streamlit_without_the_runtime_api_degrades_to_alive(monkeypatch):
    _fake_runtime(monkeypatch, types.SimpleNamespace(state=None))  # no is_active_session
    assert session.session_alive("a") is True
    from streamlit import runtime

    monkeypatch.setattr(runtime, "exists", lambda: False)  # bare mode, AppTest
    assert session.session_alive("a") is True
    assert session.session_alive(None) is True


def test_the_session_id_outside_a_session_is_none(monkeypatch):
    assert session.session_id() is None
    import streamlit.runtime.scriptrunner as scriptrunner

    monkeypatch.delattr(scriptrunner, "get_script_run_ctx")  # a release that moved it
    assert session.session_id() is None
