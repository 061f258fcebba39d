"""The Pretrained and Interpretability pages' tasks (forward runs with their options, streamed
generation, the toy-to-real ablation, logit attribution, copying and composition) give what the
library gives in process, on a tiny random GPT-2 built with transformers."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz import exec as ex
from attnviz import pretrained
from attnviz.app.interpret import tasks as interpret_tasks
from attnviz.app.tiles import tasks as tiles_tasks
from attnviz.exec.monitor import Monitor, Stop
from attnviz.frameworks import installed
from attnviz.interp import circuits, dla, qkov, roles
from attnviz.kernels import tiled_attention
from attnviz.pretrained import edits
from attnviz.pretrained import tasks as checkpoint_tasks
from tests.conftest import assert_close
from tests.exec.conftest import BOUND_S
from tests.exec.test_tasks import answer_wrong

TEXT = "The cat sat on the mat because it was"
RTOL = 1e-6  # the same float32 computation in another process with the same thread count


def through(engine, task, *args, **kwargs):
    handle = ex.submit(task, *args, engine=engine, **kwargs)
    return handle.result(BOUND_S), handle


def test_forward_with_ablation_edit_and_capture(shared, tiny_gpt2):
    ckpt = pretrained.load(tiny_gpt2)
    T = len(ckpt.encode(TEXT)[0])
    row = edits.only_key(T, 2)
    mine, handle = through(
        shared, checkpoint_tasks.forward, tiny_gpt2, TEXT, "torch",
        ablate=((0, 1, "mean"),), edit=((1, 2, T - 1, tuple(row)),), capture_layer=1,
    )  # fmt: skip
    theirs = ckpt.run(TEXT, "torch", ablate={(0, 1): "mean"}, edit={(1, 2): {T - 1: row}}, capture_layer=1)
    assert mine.ids == theirs.ids and mine.changes == theirs.changes
    assert_close(mine.logits, theirs.logits, RTOL, "logits")
    assert_close(mine.attentions, theirs.attentions, RTOL, "attentions")
    np.testing.assert_array_equal(mine.attentions[1, 2, T - 1], row)  # the edited row multiplied V
    assert [s.name for s in mine.steps] == [s.name for s in theirs.steps]
    assert (handle.progress().done, handle.progress().total) == (1, 1)


def test_forward_refuses_a_bad_edit_naming_the_field(shared, tiny_gpt2):
    T = len(pretrained.load(tiny_gpt2).encode(TEXT)[0])
    bad = (0, 0, 1, tuple(edits.only_key(T, 3)))  # weight after the query: not causal
    try:
        through(shared, checkpoint_tasks.forward, tiny_gpt2, TEXT, "torch", edit=(bad,))
    except ex.TaskFailed as error:
        assert error.field == "edit" and "key 3" in str(error)
    else:
        raise AssertionError("a non-causal row ran")


def test_generation_streams_each_token_and_ends_at_an_end_token(shared, tiny_gpt2):
    ckpt = pretrained.load(tiny_gpt2)
    mine, handle = through(
        shared, checkpoint_tasks.generate, tiny_gpt2, "the cat", "torch", 20, 1.5, None, 7, end=True
    )
    theirs = ckpt.generate("the cat", "torch", 20, temperature=1.5, seed=7, stop_at=ckpt.end_tokens())
    assert mine.output.ids == theirs.output.ids and mine.ended == theirs.ended
    assert list(handle.progress().partials) == list(zip(theirs.new_ids, theirs.probabilities, strict=True))


def test_a_stopped_generation_returns_what_it_drew(tiny_gpt2):
    """In process (the base `Monitor`): the stop arrives after the second token, deterministically."""
    seen = []
    monitor = Monitor(lambda done, total, partial: (seen.append(partial), done >= 2 and monitor.stop()))
    gen = checkpoint_tasks.generate(tiny_gpt2, "the cat", "torch", 20, 1.0, None, 1, monitor=monitor)
    assert gen.ended == "stopped" and len(gen.new_ids) == 2
    assert seen == list(zip(gen.new_ids, gen.probabilities, strict=True))


def test_induction_ablation(shared, tiny_gpt2):
    ckpt = pretrained.load(tiny_gpt2)
    mine, _ = through(shared, interpret_tasks.induction_ablation, tiny_gpt2, "torch", 6, 2, 1, 2)
    scan = roles.scan(ckpt, "torch", half=6, n=2, seed=1)
    theirs = circuits.induction_ablation(ckpt, scan, 2, "torch", seed=1)
    assert mine.top_heads == theirs.top_heads
    assert_close(
        [mine.baseline, mine.top, *mine.random], [theirs.baseline, theirs.top, *theirs.random], RTOL, "loss"
    )


def test_logit_attribution_copying_and_composition(shared, tiny_gpt2):
    ckpt = pretrained.load(tiny_gpt2)
    answer, wrong = answer_wrong(ckpt)
    parts, _ = through(shared, interpret_tasks.logit_attribution, tiny_gpt2, TEXT, answer, wrong, "torch")
    expected = dla.decompose(ckpt, TEXT, answer, wrong, "torch")
    assert_close(parts.heads, expected.heads, RTOL, "direct logit attribution")
    copying, _ = through(shared, interpret_tasks.copying_scores, tiny_gpt2)
    np.testing.assert_allclose(copying, qkov.copying_scores(ckpt), rtol=1e-12)
    comp, _ = through(shared, interpret_tasks.composition, tiny_gpt2, "k")
    theirs = qkov.composition_scores(ckpt, "k")
    np.testing.assert_allclose(comp.scores, theirs.scores, rtol=1e-12)
    assert comp.baseline == theirs.baseline


def test_circuit_tables(shared, tiny_gpt2):
    ckpt = pretrained.load(tiny_gpt2)
    ids = list(dict.fromkeys(ckpt.encode(TEXT)[0]))[:5]
    (qk, ov), _ = through(shared, interpret_tasks.circuit_tables, tiny_gpt2, 1, 2, ids, 0)
    np.testing.assert_allclose(qk.values, qkov.qk_table(ckpt, 1, 2, ids).values, rtol=1e-12)
    expected = qkov.ov_table(ckpt, 1, 2, ids)
    np.testing.assert_allclose(ov.values, expected.values, rtol=1e-12)
    np.testing.assert_array_equal(ov.self_rank, expected.self_rank)


def test_the_tiles_replay_reports_tiles_and_stops_between_two():
    """In process (the base `Monitor`): progress in tiles (every 16th and the last), the same output
    as the library's; a stop asked after the first report ends the task before the next tile."""
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((1, 1, 40, 8)).astype(np.float32) for _ in range(3))
    framework = installed()[0]
    reports = []
    whole = tiles_tasks.tiled(
        q, k, v, 4, 4, True, framework, monitor=Monitor(lambda done, total, _p: reports.append((done, total)))
    )
    theirs = tiled_attention(q, k, v, block_q=4, block_k=4, causal=True, framework=framework)
    np.testing.assert_array_equal(whole.output, theirs.output)
    total = len(theirs.tiles)
    assert reports == [(0, 1), *((i, total) for i in range(16, total + 1, 16)), (total, total)]
    monitor = Monitor(lambda done, total, _p: done >= 16 and monitor.stop())
    with pytest.raises(Stop):
        tiles_tasks.tiled(q, k, v, 4, 4, True, framework, monitor=monitor)
