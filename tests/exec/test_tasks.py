"""The app's tasks through the local engine give what the library gives in process, on a tiny random
GPT-2 built with transformers (and the Training lab's smallest preset); each reports its progress
and stops where it is asked to."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz import bench, pretrained, training
from attnviz import exec as ex
from attnviz.app.interpret import tasks as interpret_tasks
from attnviz.frameworks import installed
from attnviz.interp import attribution_patching, lens, patching, roles
from attnviz.pretrained import tasks as checkpoint_tasks
from attnviz.training import schedule
from tests.conftest import assert_close
from tests.exec.conftest import BOUND_S, STOP_S, running

CLEAN, CORRUPTED = "The cat sat on the mat because it was", "The dog sat on the mat because it was"
RTOL = 1e-6  # the same float32 computation in another process with the same thread count
# A bad name, a training's stop and time limit, a sweep's partial rows: what the tasks do in any
# framework, tested in the first installed one (TensorFlow on a Python without torch).
FRAMEWORK = (installed() or ["torch"])[0]


def answer_wrong(ckpt) -> tuple[int, int]:
    clean = ckpt.run(CLEAN).logits[-1, : ckpt.n_tokens]
    corrupted = ckpt.run(CORRUPTED).logits[-1, : ckpt.n_tokens]
    answer, wrong = int(clean.argmax()), int(corrupted.argmax())
    return answer, wrong if wrong != answer else int(np.argsort(clean)[-2])


def through(engine, task, *args, **kwargs):
    """The task's value through `engine`, and its handle."""
    handle = ex.submit(task, *args, engine=engine, **kwargs)
    return handle.result(BOUND_S), handle


def test_generation(shared, tiny_gpt2):
    ckpt = pretrained.load(tiny_gpt2)
    mine, handle = through(
        shared, checkpoint_tasks.generate, tiny_gpt2, "the cat", "torch", 6, temperature=0.7, seed=4
    )
    theirs = ckpt.generate("the cat", "torch", 6, temperature=0.7, seed=4)
    assert mine.text == theirs.text and mine.output.ids == theirs.output.ids
    assert (handle.progress().done, handle.progress().total) == (6, 6)


def test_logit_lens(shared, tiny_gpt2):
    ckpt = pretrained.load(tiny_gpt2)
    (table, tokens), handle = through(shared, interpret_tasks.logit_lens, tiny_gpt2, CLEAN, "torch", 3)
    out = ckpt.run(CLEAN, "torch")
    expected = lens.read(ckpt, out, 3)
    np.testing.assert_array_equal(table.ids, expected.ids)
    assert_close(table.probs, expected.probs, RTOL, "lens probabilities")
    assert tokens == ckpt.labels(out.ids)
    L = ckpt.config.num_hidden_layers
    assert handle.progress().done == handle.progress().total == L + 1


def test_head_importance(shared, tiny_gpt2):
    ckpt = pretrained.load(tiny_gpt2)
    mine, handle = through(shared, checkpoint_tasks.head_importance, tiny_gpt2, CLEAN, "torch", "mean")
    assert_close(mine, ckpt.head_importance(CLEAN, "torch", mode="mean"), RTOL, "importance")
    assert handle.progress().done == mine.size


def test_role_scan(shared, tiny_gpt2):
    ckpt = pretrained.load(tiny_gpt2)
    mine, handle = through(shared, interpret_tasks.role_scan, tiny_gpt2, "torch", 6, 3, 1)
    theirs = roles.scan(ckpt, "torch", half=6, n=3, seed=1)
    np.testing.assert_array_equal(mine.ids, theirs.ids)
    for role in roles.ROLES:
        assert_close(mine.scores[role], theirs.scores[role], RTOL, role)
    assert (handle.progress().done, handle.progress().total) == (3, 3)


def test_patching_sweep_and_attribution(shared, tiny_gpt2):
    ckpt = pretrained.load(tiny_gpt2)
    answer, wrong = answer_wrong(ckpt)
    mine, handle = through(shared, interpret_tasks.patching_sweep, tiny_gpt2, CLEAN, CORRUPTED, answer, wrong)
    theirs = patching.sweep(ckpt, CLEAN, CORRUPTED, answer, wrong)
    assert mine.complete
    assert_close(mine.restored, theirs.restored, RTOL, "restored")
    H = ckpt.config.num_attention_heads
    assert handle.progress().done == mine.restored.size and handle.progress().total == mine.restored.size
    estimate, _ = through(shared, interpret_tasks.attribution, tiny_gpt2, CLEAN, CORRUPTED, answer, wrong)
    expected = attribution_patching.attribution(ckpt, CLEAN, CORRUPTED, answer, wrong)
    assert_close(estimate.restored, expected.restored, RTOL, "attribution")
    assert mine.restored.shape == (ckpt.config.num_hidden_layers, H)


def test_a_bad_checkpoint_name_is_named(shared):
    with pytest.raises(ex.TaskFailed) as caught:
        through(shared, interpret_tasks.logit_lens, "no-such-checkpoint", "text", FRAMEWORK)
    assert caught.value.field == "checkpoint"


def test_training_gives_the_librarys_run_and_draws_live(shared):
    config = training.PRESETS["reverse"].replace(steps=40, snapshot_every=10)
    handle = ex.submit(schedule.train, config, [FRAMEWORK], engine=shared, training=True)
    result = handle.result(BOUND_S)
    assert result.ended is None and result.error is None
    run = result.runs[FRAMEWORK]
    expected = training.train(config, FRAMEWORK)
    assert [h["step"] for h in run.history] == list(range(1, 41))
    assert_close([h["loss"] for h in run.history], [h["loss"] for h in expected.history], RTOL, "loss")
    for name, value in expected.params.items():
        assert_close(run.params[name], value, RTOL, name)
    live = schedule.training_runs(handle.progress().partials)[FRAMEWORK]  # what a page drew as it trained
    assert live.history == run.history
    assert [s for s, _ in live.snapshots] == [s for s, _ in run.snapshots] == [0, 10, 20, 30, 40]
    for (_, a), (_, b) in zip(live.snapshots, run.snapshots, strict=True):
        np.testing.assert_array_equal(a, b)
    assert handle.progress().total == 40


def test_training_stops_keeping_what_it_learned(shared):
    config = training.PRESETS["reverse"].replace(steps=5000, snapshot_every=20)
    handle = ex.submit(schedule.train, config, [FRAMEWORK], engine=shared, training=True)
    running(handle)
    handle.stop()
    result = handle.result(STOP_S)
    run = result.runs[FRAMEWORK]
    assert result.ended == "stopped" and run.stopped and run.params is not None
    assert 1 <= run.steps_done < 5000


def test_training_ends_at_its_own_time_limit(shared):
    config = training.PRESETS["reverse"].replace(steps=5000, snapshot_every=20)
    result, _ = through(shared, schedule.train, config, [FRAMEWORK], 0.5, training=True)
    assert result.ended == "time limit (0.5 s per run on this server)"
    assert result.runs[FRAMEWORK].steps_done < 5000


def test_timing_sweep_rows_are_partials(shared):
    cases = [bench.Case(1, n, 2, 16) for n in (8, 16)]
    ceiling = {"ceiling_sizes": (32,), "ceiling_repeats": 1}
    name = next(n for n, impl in bench.REGISTRY.items() if impl.framework == FRAMEWORK)  # attnviz's layer
    result, handle = through(
        shared, bench.run_sweep, cases, [name], "cpu", repeats=3, threads=1, warmup=0, **ceiling
    )
    assert [(r["implementation"], r["length"]) for r in result["rows"]] == [(name, 8), (name, 16)]
    # The partials are the rows as measured; the sweep's end updates each row's ceiling fields in place.
    measured = [(r["implementation"], r["length"], r["median_s"]) for r in result["rows"]]
    assert [(p["implementation"], p["length"], p["median_s"]) for p in handle.progress().partials] == measured
    assert result["meta"]["threads"] == {FRAMEWORK: 1}
