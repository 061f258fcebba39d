"""The Dask engine on a `distributed.LocalCluster` (127.0.0.1, one worker process) started and closed
here: a training run and a patching sweep give the numbers the local engine gives, progress and
errors come back the same way, and Stop works — by the task's own check, and for a task that never
checks, at once (its handle ends; the thread runs out on the worker)."""

from __future__ import annotations

import importlib.util
import time

import pytest

from attnviz import exec as ex
from attnviz import pretrained, training
from attnviz.app.interpret import tasks as interpret_tasks
from attnviz.errors import SpecError
from attnviz.exec import Limits
from attnviz.training import schedule
from tests.conftest import CI, assert_close
from tests.exec import toy_tasks as toy
from tests.exec.conftest import BOUND_S, STOP_S, running, wait_until
from tests.exec.test_tasks import CLEAN, CORRUPTED, RTOL, answer_wrong

if importlib.util.find_spec("distributed") is None:  # CI installs the cluster extra: there it must run
    if CI:
        pytest.fail("distributed is not installed: pip install 'attnviz[cluster]'", pytrace=False)
    pytest.skip("distributed is not installed (pip install 'attnviz[cluster]')", allow_module_level=True)

from attnviz.exec.cluster import DaskEngine


@pytest.fixture(scope="module")
def dask():
    """A LocalCluster of one worker process on 127.0.0.1, and an engine on its scheduler."""
    from distributed import LocalCluster

    cluster = LocalCluster(
        n_workers=1, threads_per_worker=2, processes=True, host="127.0.0.1", dashboard_address="127.0.0.1:0"
    )
    engine = DaskEngine(cluster.scheduler_address)
    yield engine
    engine.close()
    cluster.close()


def test_progress_partials_and_the_value(dask):
    handle = ex.submit(toy.counts, 5, engine=dask)
    assert handle.result(BOUND_S) == 55
    p = handle.progress()
    assert (p.state, p.done, p.total, p.partials) == ("done", 5, 5, (1, 4, 9, 16, 25))
    assert p.worker.startswith("tcp://127.0.0.1:")


def test_the_tasks_error_names_its_field(dask):
    with pytest.raises(ex.TaskFailed) as caught:
        ex.submit(toy.bad_input, 7, engine=dask).result(BOUND_S)
    assert caught.value.field == "lr" and str(caught.value).startswith("lr: got 7;")


def test_training_gives_the_local_engines_numbers(dask, shared):
    config = training.PRESETS["reverse"].replace(steps=30, snapshot_every=10)
    there = ex.submit(schedule.train, config, ["torch"], engine=dask, training=True)
    here = ex.submit(schedule.train, config, ["torch"], engine=shared, training=True)
    a, b = there.result(BOUND_S).runs["torch"], here.result(BOUND_S).runs["torch"]
    assert_close([h["loss"] for h in a.history], [h["loss"] for h in b.history], RTOL, "loss")
    for name, value in b.params.items():
        assert_close(a.params[name], value, RTOL, name)
    live = schedule.training_runs(there.progress().partials)["torch"]
    assert [s for s, _ in live.snapshots] == [0, 10, 20, 30] and live.history == a.history


def test_patching_sweep_gives_the_local_engines_numbers(dask, shared, tiny_gpt2):
    answer, wrong = answer_wrong(pretrained.load(tiny_gpt2))
    args = (tiny_gpt2, CLEAN, CORRUPTED, answer, wrong, "torch")
    there = ex.submit(interpret_tasks.patching_sweep, *args, engine=dask)
    here = ex.submit(interpret_tasks.patching_sweep, *args, engine=shared)
    a, b = there.result(BOUND_S), here.result(BOUND_S)
    assert a.complete and b.complete
    assert_close(a.restored, b.restored, RTOL, "restored")
    assert there.progress().done == a.restored.size


def test_stop_ends_a_training_keeping_what_it_learned(dask):
    config = training.PRESETS["reverse"].replace(steps=5000, snapshot_every=20)
    handle = ex.submit(schedule.train, config, ["torch"], engine=dask, training=True)
    running(handle)
    stopped_at = time.monotonic()
    handle.stop()
    result = handle.result(STOP_S)
    assert time.monotonic() - stopped_at < STOP_S
    assert result.ended == "stopped" and 1 <= result.runs["torch"].steps_done < 5000


def test_a_task_that_ignores_stop_ends_at_once_and_the_next_runs(dask):
    handle = ex.submit(toy.ignores_stop, 8.0, engine=dask, limits=Limits(grace_s=1))
    running(handle)
    stopped_at = time.monotonic()
    handle.stop()
    with pytest.raises(ex.Stopped) as caught:
        handle.result(STOP_S)
    assert caught.value.forced and time.monotonic() - stopped_at < STOP_S
    assert ex.submit(toy.add, 2, 5, engine=dask).result(BOUND_S) == 7


def test_a_stop_with_a_longer_grace_lets_the_last_step_finish(dask):
    """As on the local engine: 2 s to finish after the stop, 1 s of grace in its limits, 20 s asked."""
    handle = ex.submit(toy.slow_to_stop, 2.0, engine=dask, limits=Limits(grace_s=1))
    running(handle)
    handle.stop(grace_s=20.0)
    assert handle.result(BOUND_S) == "finished"


def test_the_time_limit(dask):
    with pytest.raises(ex.OverTime, match="over the time limit of 1 s"):
        ex.submit(toy.until_stopped, engine=dask, limits=Limits(seconds=1)).result(BOUND_S)


def test_the_environment_chooses_the_cluster(dask, monkeypatch):
    monkeypatch.setattr(ex, "_ENGINES", {})
    monkeypatch.setenv(ex.ENV_SCHEDULER, dask.address)
    chosen = ex.get_engine()
    assert isinstance(chosen, DaskEngine) and chosen.address == dask.address
    assert ex.submit(toy.add, 1, 2).result(BOUND_S) == 3
    chosen.close()
    with pytest.raises(SpecError) as caught:
        ex.get_engine("host-without-scheme:8786")
    assert caught.value.field == ex.ENV_SCHEDULER


def test_a_task_still_running_after_a_forced_stop_gets_its_worker_restarted():
    """The last resort, on a cluster of its own: a task that ignores Stop and is still running
    `stuck_s` after it is ended with its worker (the nanny starts a new one); the next task runs."""
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=1, processes=True, host="127.0.0.1", dashboard_address="127.0.0.1:0"
    ) as cluster:
        engine = DaskEngine(cluster.scheduler_address, stuck_s=1.0)
        try:
            handle = ex.submit(toy.ignores_stop, 120.0, engine=engine, limits=Limits(grace_s=1))
            running(handle)
            first = handle.progress().worker
            handle.stop()
            with pytest.raises(ex.Stopped):
                handle.result(STOP_S)
            workers = lambda: set(engine.client().scheduler_info()["workers"])  # noqa: E731
            wait_until(lambda: workers() and first not in workers(), what="the stuck worker replaced")
            again = ex.submit(toy.pid, engine=engine)
            assert again.result(BOUND_S) > 0 and again.progress().worker != first
        finally:
            engine.close()
