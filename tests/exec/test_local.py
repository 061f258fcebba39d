"""The local engine with real worker processes: values, progress, errors and every fault the issue
names — a stop (cooperative and forced), a worker killed from outside, the time limit, the memory
budget, a full queue — each ending within its bound, the worker replaced where it had to die."""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest

from attnviz import exec as ex
from attnviz.errors import SpecError
from attnviz.exec import Limits
from tests.conftest import requires
from tests.exec import toy_tasks as toy
from tests.exec.conftest import BOUND_S, STOP_S, alive, rss_mib, running, wait_until


def test_value_progress_and_partials(local):
    handle = local.submit(ex.Handle("counts", Limits()), ex._payload(toy.counts, (5,), {}))
    assert handle.result(BOUND_S) == 1 + 4 + 9 + 16 + 25
    p = handle.progress()
    assert (p.state, p.done, p.total, p.partials) == ("done", 5, 5, (1, 4, 9, 16, 25))
    assert p.fraction == 1.0 and isinstance(p.worker, int)


def test_submit_through_the_door(local):
    handle = ex.submit(toy.add, 2, b=3, engine=local)
    assert handle.wait(BOUND_S)  # the start (or the end) arrives: no fixed sleep
    assert handle.result(BOUND_S) == 5 and handle.error() is None


def test_any_importable_function_runs_by_reference(local):
    """The engine knows no task catalogue: a function of the standard library (no `monitor`
    parameter, no signature at all) runs as a task does."""
    import math

    assert ex.submit(math.hypot, 3, 4, engine=local).result(BOUND_S) == 5.0


def test_a_workers_blas_runs_at_the_servers_thread_count_and_tensorflow_on_malloc(local):
    """NumPy's BLAS in a worker at ATTNVIZ_THREADS, not a thread per core, and TensorFlow's oneDNN
    kernels on malloc, not its arena (issue 46 §23); a value the operator set is kept, and the
    server's own environment is left as it was."""
    from attnviz.exec.local import BLAS_THREADS, TF_ALLOCATOR

    threads = os.environ.get("ATTNVIZ_THREADS", "1")
    names = (*BLAS_THREADS, *TF_ALLOCATOR)
    before = {name: os.environ.get(name) for name in names}
    got = ex.submit(toy.worker_environment, engine=local).result(timeout=60)
    wanted = {**dict.fromkeys(BLAS_THREADS, threads), **TF_ALLOCATOR}
    assert got == {name: before[name] or wanted[name] for name in names}
    assert TF_ALLOCATOR == {"TF_ONEDNN_USE_SYSTEM_ALLOCATOR": "1"}
    assert {name: os.environ.get(name) for name in names} == before


def test_result_waits_at_most_its_timeout(local):
    handle = ex.submit(toy.ignores_stop, 30.0, engine=local, limits=Limits(grace_s=1))
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        handle.result(timeout=0.2)
    assert time.monotonic() - started < 5
    handle.stop()
    with pytest.raises(ex.Stopped):
        handle.result(STOP_S)


def test_the_tasks_error_names_its_field(local):
    with pytest.raises(ex.TaskFailed) as caught:
        ex.submit(toy.bad_input, 5, engine=local).result(BOUND_S)
    error = caught.value
    assert str(error) == "lr: got 5; allowed: a number from 1e-05 to 1."
    assert (error.field, error.type_name) == ("lr", "SpecError")
    assert "bad_input" in error.remote_traceback


def test_refused_before_anything_runs():
    with pytest.raises(SpecError) as caught:
        ex.submit(lambda: 1, engine="local")
    assert caught.value.field == "task"
    with pytest.raises(SpecError) as caught:
        ex.submit(toy.add, lambda: 1, 2, engine="local")
    assert caught.value.field == "arguments"


def test_a_value_that_cannot_travel_is_named(local):
    with pytest.raises(ex.TaskFailed, match="cannot be sent back"):
        ex.submit(toy.unpicklable_result, engine=local).result(BOUND_S)


def test_stop_ends_the_task_and_hands_its_memory_back(local):
    """Cooperative: the task sees `monitor.stopped()`, returns what it did; its 200 MiB are given back."""
    warmup = ex.submit(toy.pid, engine=local)
    pid = warmup.result(BOUND_S)
    handle = ex.submit(toy.until_stopped, 200, engine=local)
    running(handle)
    if handle.progress().worker != pid:  # the other worker took it: measure that one
        pid = handle.progress().worker
    wait_until(lambda: rss_mib(pid) > 150, what="the task's memory in its worker")
    held = rss_mib(pid)
    stopped_at = time.monotonic()
    handle.stop()
    steps = handle.result(STOP_S)
    assert time.monotonic() - stopped_at < STOP_S and steps >= 1
    wait_until(lambda: rss_mib(pid) < held - 150, what="the worker's memory handed back")
    assert alive(pid), "a task that stopped by itself keeps its worker"


def test_a_task_that_ignores_stop_is_killed_and_its_worker_replaced(local):
    handle = ex.submit(toy.ignores_stop, engine=local, limits=Limits(grace_s=1))
    running(handle)
    pid = handle.progress().worker
    stopped_at = time.monotonic()
    handle.stop()
    with pytest.raises(ex.Stopped) as caught:
        handle.result(STOP_S)
    assert caught.value.forced and time.monotonic() - stopped_at < STOP_S
    wait_until(lambda: not alive(pid), STOP_S, "the killed worker gone")
    assert ex.submit(toy.add, 1, 1, engine=local).result(BOUND_S) == 2


@pytest.mark.parametrize("grace_s", [None, 20.0])
def test_a_stop_with_a_longer_grace_lets_the_last_step_finish(local, grace_s):
    """The task needs 2 s after the stop, its limits allow 1: a plain stop kills it (`Stopped`,
    forced); a stop that gives it 20 s (a visitor's Stop, who waits for what was drawn) gets its value."""
    handle = ex.submit(toy.slow_to_stop, 2.0, engine=local, limits=Limits(grace_s=1))
    running(handle)
    handle.stop(grace_s=grace_s)
    if grace_s is None:
        with pytest.raises(ex.Stopped) as caught:
            handle.result(BOUND_S)
        assert caught.value.forced
    else:
        assert handle.result(BOUND_S) == "finished"


def test_a_task_on_a_checkpoint_goes_to_the_free_worker_that_has_it_loaded(local):
    """Two workers, one has run a task on checkpoint "a", the other one on "c": then, both free,
    tasks on "a" and "c" in turn each run where their checkpoint is loaded; while "a"'s worker is
    busy, the next "a" task does not wait for it."""
    assert ex._affinity(toy.pid_on, ("a",), {}) == "a" and ex._affinity(toy.add, (1, 2), {}) is None
    from attnviz.app.models.tasks import compare_models
    from attnviz.pretrained.tasks import generate

    assert ex._affinity(generate, ("/models/smol", "text"), {}) == "/models/smol"
    assert ex._affinity(generate, (), {"source": "b", "text": "t"}) == "b"
    assert ex._affinity(compare_models, ("x", "y", "t"), {}) is None  # two checkpoints: no one source
    on_a, on_c = ex.submit(toy.held_on, "a", engine=local), ex.submit(toy.held_on, "c", engine=local)
    running(on_a), running(on_c)  # one on each worker
    for handle in (on_a, on_c):
        handle.stop()
    worker = {"a": on_a.result(BOUND_S), "c": on_c.result(BOUND_S)}
    assert worker["a"] != worker["c"]
    for _ in range(5):
        for key in ("a", "c"):
            assert ex.submit(toy.pid_on, key, engine=local).result(BOUND_S) == worker[key]
    busy = ex.submit(toy.held_on, "a", engine=local)
    running(busy)
    assert busy.progress().worker == worker["a"]
    assert ex.submit(toy.pid_on, "a", engine=local).result(BOUND_S) == worker["c"]  # not queued behind it
    busy.stop()
    busy.result(BOUND_S)


def test_a_worker_killed_from_outside(local):
    handle = ex.submit(toy.ignores_stop, engine=local)
    running(handle)
    pid = handle.progress().worker
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(ex.WorkerStopped) as caught:
        handle.result(STOP_S)
    assert caught.value.exitcode == -signal.SIGKILL
    assert str(caught.value) == "the worker stopped (signal 9, SIGKILL)"
    replaced = ex.submit(toy.pid, engine=local)
    assert replaced.result(BOUND_S) != pid


def test_a_worker_killed_while_idle_is_replaced(single):
    pid = ex.submit(toy.pid, engine=single).result(BOUND_S)
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not alive(pid), STOP_S, "the idle worker gone")
    assert ex.submit(toy.add, 2, 2, engine=single).result(BOUND_S) == 4


@pytest.mark.parametrize("task", [toy.ignores_stop, toy.until_stopped])
def test_the_time_limit_ends_a_task(local, task):
    """Whether the task stops by itself (`until_stopped`) or is killed (`ignores_stop`)."""
    handle = ex.submit(task, engine=local, limits=Limits(seconds=1, grace_s=1))
    with pytest.raises(ex.OverTime) as caught:
        handle.result(BOUND_S)
    assert str(caught.value) == "over the time limit of 1 s"
    assert handle.progress().elapsed_s < 1 + 1 + STOP_S


def test_stop_through_the_library_callback(local):
    """`monitor.step`, as a library loop calls it, ends the task where it is."""
    handle = ex.submit(toy.stepper, 100_000, engine=local)
    running(handle)
    handle.stop()
    with pytest.raises(ex.Stopped) as caught:
        handle.result(STOP_S)
    assert not caught.value.forced
    assert handle.progress().done < 100_000


def test_over_the_memory_budget_the_worker_lives_on(single):
    pid = ex.submit(toy.pid, engine=single).result(BOUND_S)
    budget = Limits(memory_mb=200)
    with pytest.raises(ex.OverMemory) as caught:
        ex.submit(toy.allocate, 600, engine=single, limits=budget).result(BOUND_S)
    assert str(caught.value).startswith("over the memory budget of 200 MiB")
    assert caught.value.budget_mb == 200
    assert ex.submit(toy.allocate, 50, engine=single, limits=budget).result(BOUND_S) == 50 * 2**18
    # What a task loads outside its budget (a framework, a checkpoint) does not count.
    loaded = ex.submit(toy.allocate_loaded, 300, 50, engine=single, limits=budget)
    assert loaded.result(BOUND_S) == 350 * 2**18
    assert ex.submit(toy.pid, engine=single).result(BOUND_S) == pid, "the same worker throughout"


@pytest.mark.slow
@pytest.mark.parametrize(
    "framework", [pytest.param(fw, marks=requires(fw)) for fw in ("torch", "tensorflow")]
)
def test_over_the_memory_budget_in_each_framework(single, framework):
    """The frameworks' own allocators fail under the worker's limit with an error it recognises."""
    budget = Limits(memory_mb=200, seconds=300)
    with pytest.raises(ex.OverMemory, match="200 MiB"):
        ex.submit(toy.allocate_framework, framework, 600, engine=single, limits=budget).result(300)
    small = ex.submit(toy.allocate_framework, framework, 50, engine=single, limits=budget)
    assert small.result(300) == 50 * 2**18


@pytest.mark.slow
@requires("tensorflow")
def test_tensorflow_leaves_a_task_its_budget(single):
    """Issue 46 §23: Whisper failed inside oneDNN, or its worker died of SIGSEGV, under the 512 MiB
    guard in a worker that had run other models in TensorFlow. TensorFlow's own CPU arena (its oneDNN
    allocator's default) takes each new region twice the size of the last and, refused by the guard,
    backs off to the largest it can get: there a 300 MiB tensor took 475 MiB of the budget, and
    NumPy's 100 MiB then failed, with 400 MiB of the 512 in use. The workers run oneDNN on malloc."""
    budget = Limits(memory_mb=512, seconds=300)
    handle = ex.submit(toy.tensorflow_then_numpy, 512, 300, 100, engine=single, limits=budget)
    assert handle.result(300) == (300 + 100) * 2**18


def test_an_idle_worker_gives_its_memory_back_within_its_idle_time():
    """Issue 46 §24: a task leaves 300 MiB in its worker (as loaded checkpoints stay); `idle_s` after
    it, the worker is ended and the warm slot's fresh one holds none of it."""
    engine = ex.LocalEngine(ex.Budget(workers=1, nice=5, idle_s=2))
    try:
        engine.warm(())
        pid = ex.submit(toy.keep, 300, engine=engine).result(BOUND_S)
        held, ended = rss_mib(pid), time.monotonic()
        assert held > 300
        wait_until(lambda: not alive(pid), 2 + STOP_S, "the idle worker ended")
        assert time.monotonic() - ended >= 2 - 0.1  # not before its idle time
        wait_until(lambda: engine.workers() not in ([], [pid]), BOUND_S, "a fresh warm worker")
        assert rss_mib(engine.workers()[0]) < held - 250
        assert ex.submit(toy.add, 2, 2, engine=engine).result(BOUND_S) == 4
    finally:
        engine.close()


def test_a_worker_left_above_its_bound_is_replaced_after_its_task():
    """A task that leaves its worker above `keep_mb` resident: the worker is ended at once (the next
    task gets a fresh one); under the bound it is kept."""
    engine = ex.LocalEngine(ex.Budget(workers=1, nice=5, keep_mb=200))
    try:
        over = ex.submit(toy.keep, 300, engine=engine).result(BOUND_S)
        wait_until(lambda: not alive(over), STOP_S, "the worker over its bound ended")
        under = ex.submit(toy.keep, 10, engine=engine).result(BOUND_S)
        assert under != over
        assert ex.submit(toy.pid, engine=engine).result(BOUND_S) == under, "kept under the bound"
    finally:
        engine.close()


def test_a_task_waits_for_a_worker_at_most_its_wait_limit(single):
    busy = ex.submit(toy.ignores_stop, engine=single, limits=Limits(grace_s=1))
    running(busy)
    waiting = ex.submit(toy.add, 1, 2, engine=single, limits=Limits(wait_s=1))
    assert waiting.progress().state == "queued"
    with pytest.raises(ex.NoWorker, match="within 1 s"):
        waiting.result(BOUND_S)
    busy.stop()
    with pytest.raises(ex.Stopped):
        busy.result(STOP_S)


def test_a_queued_task_stops_at_once(single):
    busy = ex.submit(toy.ignores_stop, engine=single, limits=Limits(grace_s=1))
    running(busy)
    queued = ex.submit(toy.add, 1, 2, engine=single)
    queued.stop()
    with pytest.raises(ex.Stopped):
        queued.result(0.5)
    busy.stop()
    with pytest.raises(ex.Stopped):
        busy.result(STOP_S)


def test_a_quick_task_is_taken_before_those_queued_earlier(single):
    """Issue 42's ten visitors: a page's quick run (the explorer's) waited behind a queue of model tasks
    past the queue's limit. The one worker busy; a task queued, then a quick one: the quick one runs
    first once the worker is free, the other after it."""
    busy = ex.submit(toy.until_stopped, engine=single)
    running(busy)
    earlier = ex.submit(toy.pid, engine=single)
    quick = ex.submit(toy.add, 2, 3, engine=single, quick=True)
    stop_and_wait(busy)
    assert quick.result(BOUND_S) == 5
    earlier.result(BOUND_S)
    assert quick.progress().state == earlier.progress().state == "done"
    assert quick._started <= earlier._started  # the quick task started first


def stop_and_wait(handle) -> None:
    """Stop `handle` and wait for its end, whichever way it ends."""
    handle.stop()
    handle.wait(0)
    wait_until(handle.done, STOP_S, f"{handle} stopped")


def test_trainings_count_against_the_workers(local):
    first = ex.submit(toy.until_stopped, engine=local, training=True)
    running(first)
    with pytest.raises(ex.Busy) as caught:
        ex.submit(toy.until_stopped, engine=local, training=True)
    assert (caught.value.running, caught.value.limit, caught.value.field) == (1, 1, "runs")
    assert ex.submit(toy.add, 1, 1, engine=local).result(BOUND_S) == 2, "a page's run still finds a worker"
    stop_and_wait(first)
    second = ex.submit(toy.until_stopped, engine=local, training=True)
    running(second)
    stop_and_wait(second)
    assert second.result(0) >= 1


def test_workers_run_below_the_servers_priority(local):
    local.warm()
    wait_until(lambda: len(local.workers()) == 2, what="two warm workers")
    niceness = min(19, os.getpriority(os.PRIO_PROCESS, 0) + local.budget.nice)
    for pid in local.workers():  # each worker lowers its own priority as it starts
        wait_until(
            lambda pid=pid: os.getpriority(os.PRIO_PROCESS, pid) == niceness, what=f"worker {pid} niced"
        )


def test_closing_the_engine_ends_its_tasks_and_workers():
    engine = ex.LocalEngine(ex.Budget(workers=1, trainings=1, nice=5, threads=1))
    handle = ex.submit(toy.ignores_stop, engine=engine, limits=Limits(grace_s=1))
    running(handle)
    pid = handle.progress().worker
    queued = ex.submit(toy.add, 1, 1, engine=engine)
    engine.close()
    for each in (handle, queued):
        with pytest.raises(ex.Stopped):
            each.result(0)
    wait_until(lambda: not alive(pid), STOP_S, "the worker ended")
    with pytest.raises(RuntimeError, match="closed"):
        ex.submit(toy.add, 1, 1, engine=engine)


def test_a_task_whose_visitor_is_gone_is_stopped(local):
    """`stop_when_gone`: a tab away for one check keeps its task; one gone for `after_s` stops it."""
    answers = [True, False] + [True] * 20  # away for one check, then back for twenty
    calls = []

    def alive() -> bool:
        calls.append(time.monotonic())
        return answers[len(calls) - 1] if len(calls) <= len(answers) else False

    handle = ex.submit(toy.until_stopped, engine=local).stop_when_gone(alive, after_s=0.5, every_s=0.05)
    assert handle.result(BOUND_S) >= 1 and handle.stop_asked
    gone = calls[len(answers)]  # the first check of the lasting absence
    assert calls[-1] - gone >= 0.5, "stopped only after after_s of absence, not at the blink"


def test_a_live_visitor_keeps_the_task(local):
    handle = ex.submit(toy.counts, 3, engine=local).stop_when_gone(lambda: True, every_s=0.01)
    assert handle.result(BOUND_S) == 14 and not handle.stop_asked


def test_a_scheduler_without_the_cluster_extra_is_named(monkeypatch):
    """As on a machine without `distributed`: `sys.modules[name] = None` makes `find_spec` answer None."""
    monkeypatch.setitem(sys.modules, "distributed", None)
    monkeypatch.setattr(ex, "_ENGINES", {})
    with pytest.raises(SpecError) as caught:
        ex.get_engine("tcp://127.0.0.1:8786")
    assert caught.value.field == ex.ENV_SCHEDULER and "attnviz[cluster]" in str(caught.value)
    with pytest.raises(SpecError, match="tcp://host:8786"):
        ex.get_engine("127.0.0.1:8786")
