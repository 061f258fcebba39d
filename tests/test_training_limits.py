"""The server's bounds on training (issue 20 §1) at the library's door, `training.start_job`.

Size refused before any allocation, N+1 concurrent starts refused with the limit,
the wall-time cap, a run that ends when its session does (and drops its models),
and `attnviz.app.frame.session` on both sides of Streamlit's non-public runtime API.
The same against a live server: tests/browser/test_training_limits.py.
"""

import time
import types

import pytest

from attnviz import training as tr
from attnviz.app.frame import session
from attnviz.errors import BudgetError

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


def _wait(predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.05)
    return predicate()


@pytest.fixture(autouse=True)
def _no_jobs_left():
    yield
    tr.stop_all()
    assert _wait(lambda: tr.running_jobs() == 0, 30)


def test_an_over_budget_run_is_refused_before_anything_is_allocated(monkeypatch):
    def allocate(*args, **kwargs):
        raise AssertionError("allocated before the size check")

    monkeypatch.setattr(tr.jobs, "TrainingJob", allocate)
    monkeypatch.setattr(tr.jobs, "init_params", allocate)
    with pytest.raises(BudgetError) as error:
        tr.start_job(HOSTILE, ["torch"], limits=tr.TrainLimits())
    text = str(error.value)
    size = tr.estimate(HOSTILE)
    assert f"{size.params:,} parameters × batch 256 × sequence 64" in text
    fits = int(text.split("a batch of at most ")[1].split()[0])
    assert tr.estimate(HOSTILE.replace(batch=fits)).work <= tr.TrainLimits().work
    assert tr.estimate(HOSTILE.replace(batch=fits + 1)).work > tr.TrainLimits().work or (
        tr.estimate(HOSTILE.replace(batch=fits + 1)).memory > tr.TrainLimits().memory_mb * 2**20
    )
    assert tr.running_jobs() == 0


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


def test_one_start_more_than_the_server_allows_gets_the_limit_message():
    limits = tr.TrainLimits(runs=2)
    first = [tr.start_job(LONG, ["torch"], limits=limits) for _ in range(2)]
    assert tr.running_jobs() == 2
    with pytest.raises(tr.BusyError) as error:
        tr.start_job(TINY, ["torch"], limits=limits)
    assert "ATTNVIZ_TRAIN_MAX_RUNS=2" in str(error.value) and error.value.field == "runs"
    first[0].stop()
    assert _wait(lambda: tr.running_jobs() == 1)
    third = tr.start_job(TINY, ["torch"], limits=limits)  # a slot came free
    assert third.join(60) and third.runs["torch"].finished


def test_the_wall_time_limit_ends_a_run_keeping_what_it_learned():
    job = tr.start_job(LONG.replace(steps=5000), ["torch"], limits=tr.TrainLimits(seconds=1))
    assert job.join(30)
    run = job.runs["torch"]
    assert job.ended.startswith("time limit") and run.stopped and 0 < run.steps_done < 5000
    assert run.params is not None


def test_a_run_ends_within_seconds_when_its_session_goes_and_drops_its_models():
    there = {"alive": True}
    job = tr.start_job(LONG, ["torch"], alive=lambda: there["alive"], limits=tr.TrainLimits())
    assert _wait(lambda: job.runs["torch"].steps_done > 5)
    assert job.running and job.trainers
    there["alive"] = False
    # Ends by itself (no stop() is called); how soon is measured on a live server (docs/security.md),
    # not asserted here, where a loaded machine stretches every step.
    assert job.join(120)
    assert job.ended == "session ended" and job.trainers == {}  # the models are released
    assert tr.running_jobs() == 0


def test_a_tab_that_reconnects_within_the_grace_keeps_its_run(monkeypatch):
    monkeypatch.setattr(tr.jobs, "GONE_AFTER_S", 2.0)
    answers = iter([True, False, True] + [True] * 10_000)
    job = tr.start_job(LONG, ["torch"], alive=lambda: next(answers), limits=tr.TrainLimits())
    assert not job.join(3.0) and job.ended is None
    job.stop()


def test_bad_operator_settings_warn_and_keep_the_default(monkeypatch):
    monkeypatch.setenv("ATTNVIZ_TRAIN_MAX_RUNS", "lots")
    monkeypatch.setenv("ATTNVIZ_TRAIN_MAX_SECONDS", "0")
    monkeypatch.setenv("ATTNVIZ_TRAIN_SAVED_MB", "64")
    with pytest.warns(RuntimeWarning, match="ATTNVIZ_TRAIN_MAX_RUNS"):
        limits = tr.TrainLimits.from_env()
    assert limits.runs == tr.TrainLimits().runs and limits.seconds == tr.TrainLimits().seconds
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
