"""The Decoding and Compare-models pages' tasks give what the library gives in process: a traced
generation (and the real cache's bytes of the same generation), the time per token (the same
tokens at the same positions; times are measured, never compared), and two decoders side by side
(tiny random GPT-2 and Gemma 3 built with transformers)."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz import exec as ex
from attnviz import pretrained
from attnviz.app.decoding import tasks as decoding_tasks
from attnviz.app.models import tasks as models_tasks
from attnviz.interp import roles
from attnviz.interp.side_by_side import side_by_side
from attnviz.kernels import decoding
from attnviz.kernels.kv_cache import kv_bytes
from tests.conftest import assert_close
from tests.exec.conftest import BOUND_S

TEXT = "The cat sat on the mat because it was"
RTOL = 1e-6  # the same float32 computation in another process with the same thread count


def through(engine, task, *args, **kwargs):
    handle = ex.submit(task, *args, engine=engine, **kwargs)
    return handle.result(BOUND_S), handle


@pytest.fixture(scope="module")
def tiny_gemma(tmp_path_factory) -> str:
    """A tiny random Gemma 3 (local layers with a 5-token window shorter than the text, MQA)."""
    from tests.kernels.test_decoding import make_tiny_gemma

    return str(make_tiny_gemma(tmp_path_factory.mktemp("exec-tiny-gemma") / "gemma"))


@pytest.mark.parametrize("which", ["gpt2", "gemma"])
def test_decoding_trace_is_the_librarys_and_its_cache_bytes_the_real_caches(
    shared, tiny_gpt2, tiny_gemma, which
):
    source = tiny_gpt2 if which == "gpt2" else tiny_gemma
    ckpt = pretrained.load(source)
    got, handle = through(
        shared, decoding_tasks.decoding_trace, source, TEXT, "torch", 5, [1], None, 0.8, None, 3
    )
    theirs = decoding.trace(ckpt, TEXT, "torch", 5, layers=[1], temperature=0.8, seed=3)
    assert got.ids == theirs.ids and got.tokens == theirs.tokens and got.layers == (1,)
    for s, (a, b) in enumerate(zip(got.steps, theirs.steps, strict=True)):
        assert (a.position, a.token, a.first_key, a.cached, a.uncached) == (
            b.position, b.token, b.first_key, b.cached, b.uncached,
        )  # fmt: skip
        assert_close(a.attention[1], b.attention[1], RTOL, f"step {s} attention")
        assert_close(got.cached_keys(s, 1), theirs.cached_keys(s, 1), RTOL, f"step {s} keys")
        assert_close(got.cached_values(s, 1), theirs.cached_values(s, 1), RTOL, f"step {s} values")
    gen = ckpt.generate(TEXT, "torch", 5, temperature=0.8, seed=3)
    assert gen.output.ids == got.ids  # the same generation, traced and generated
    assert got.cached_positions == len(got.ids) - 1
    assert got.cache_bytes == gen.cache_bytes == kv_bytes(ckpt.config, got.cached_positions)
    for logits, token, p in zip(gen.logits, gen.new_ids, got.model_probabilities, strict=True):
        z = logits[: ckpt.n_tokens].astype(np.float64)
        assert p == pytest.approx(np.exp(z[token] - z.max()) / np.exp(z - z.max()).sum(), rel=1e-9)
    # one generation, counted per token (issue 46 point 21); no second run beside it (issue 41)
    assert (handle.progress().done, handle.progress().total) == (5, 5)


def test_a_bad_trace_setting_is_named(shared, tiny_gpt2):
    with pytest.raises(ex.TaskFailed) as caught:
        through(shared, decoding_tasks.decoding_trace, tiny_gpt2, TEXT, "torch", 4, [99])
    assert caught.value.field == "layers"


def test_time_per_token_runs_the_librarys_tokens(shared, tiny_gpt2):
    ckpt = pretrained.load(tiny_gpt2)
    mine, handle = through(shared, decoding_tasks.time_per_token, tiny_gpt2, TEXT, "torch", 4, 2)
    theirs = decoding.time_per_token(ckpt, TEXT, "torch", 4, 2)
    assert mine.ids == theirs.ids
    np.testing.assert_array_equal(mine.positions, theirs.positions)
    assert mine.runs_cached.shape == mine.runs_uncached.shape == (2, 4)
    np.testing.assert_array_equal(mine.cached, np.median(mine.runs_cached, axis=0))
    assert (mine.cached > 0).all() and (mine.uncached > 0).all() and mine.prompt > 0
    assert (handle.progress().done, handle.progress().total) == (1, 1)


def test_compare_models_is_side_by_side_and_counts_both_scans(shared, tiny_gpt2, tiny_gemma):
    first, second = pretrained.load(tiny_gpt2), pretrained.load(tiny_gemma)
    (a, b), handle = through(
        shared, models_tasks.compare_models, tiny_gpt2, tiny_gemma, TEXT, "torch", 6, 3, 2
    )
    expected = side_by_side(first, second, TEXT, "torch", half=6, n=3, seed=2)
    for mine, theirs in zip((a, b), expected, strict=True):
        assert mine.tokens == theirs.tokens and mine.layer_types == theirs.layer_types
        assert_close(mine.sink, theirs.sink, RTOL, "sink")
        assert_close(mine.span, theirs.span, RTOL, "span")
        for role in roles.ROLES:
            assert_close(mine.role_peak(role), theirs.role_peak(role), RTOL, role)
        assert mine.kv == theirs.kv and mine.parameters == theirs.parameters
    assert b.layer_types is not None and "local" in b.layer_types and a.layer_types is None
    assert (handle.progress().done, handle.progress().total) == (6, 6)  # 3 sequences per model
