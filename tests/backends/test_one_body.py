"""One attention body per framework: a variant added at the documented override point
(`MultiHeadAttention.after_split_heads`, docs/architecture.md's recipe) reaches the full pass, cached
generation and a patching sweep's shared prefix alike — there is no second copy of the body to miss it.

The toy variant doubles each head's query and shifts each new key by 0.5 (after RoPE): the shift lives
in the keys the KV cache keeps, so a cached path that bypassed the hook would read other keys.
"""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.frameworks import backend
from attnviz.interp import patching
from attnviz.pretrained.sources import open_directory
from tests.conftest import RTOL_MODEL, assert_close, requires
from tests.pretrained.test_llama import make_tiny_llama

FRAMEWORKS = [pytest.param("torch"), pytest.param("tensorflow", marks=requires("tensorflow"))]
PROMPT = "The quick brown"
CLEAN, CORRUPTED = "the cat sat on the mat", "the dog sat on the mat"  # a one-token shared prefix


def with_variant(ckpt, framework: str):
    """`ckpt`'s model in `framework` with every layer's attention of the variant's class."""
    base = backend(framework).MultiHeadAttention

    class Variant(base):
        def after_split_heads(self, q, k, v, *, start=0, record=None):
            q, k, v = super().after_split_heads(
                q, k, v, start=start, **({} if record is None else {"record": record})
            )
            return q * 2.0, (None if k is None else k + 0.5), v

    for attention in ckpt.model(framework).attention:
        attention.__class__ = Variant
    return ckpt


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return make_tiny_llama(tmp_path_factory.mktemp("one-body"))


def answer_pair(ckpt):
    answer = ckpt.tokenizer.encode(" mat", add_special_tokens=False).ids[0]
    return answer, (answer + 1) % ckpt.n_tokens


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_variant_reaches_the_full_pass_and_cached_generation(folder, framework):
    plain = open_directory(folder, "plain")
    varied = with_variant(open_directory(folder, "varied"), framework)  # not the shared `load` cache
    before = plain.generate(PROMPT, framework, 6, temperature=0)
    cached = varied.generate(PROMPT, framework, 6, temperature=0)
    full = varied.generate(PROMPT, framework, 6, temperature=0, cache=False)
    # the variant changes the numbers …
    assert np.abs(full.logits[0] - before.logits[0]).max() > 1e-3
    # … and the cached path computes exactly what the full pass does with it
    assert cached.new_ids == full.new_ids
    assert_close(cached.logits, full.logits, RTOL_MODEL[framework], "cached vs full logits, with the variant")


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_variant_reaches_the_patching_sweeps_shared_prefix(folder, framework):
    plain = open_directory(folder, "plain")
    varied = with_variant(open_directory(folder, "varied"), framework)  # not the shared `load` cache
    a, w = answer_pair(varied)
    clean_ids, corrupted_ids = varied.encode(CLEAN)[0], varied.encode(CORRUPTED)[0]
    assert patching.shared_prefix(clean_ids, corrupted_ids) >= 1  # the sweep reads a prefix cache
    got = patching.sweep(varied, CLEAN, CORRUPTED, a, w, framework)
    # the sweep's promise, under the variant: one full patched run per head
    base = varied.run_ids(clean_ids, framework, head_outputs=True)
    worse = varied.run_ids(corrupted_ids, framework)
    gap = got.clean_diff - got.corrupted_diff
    L, H = base.head_outputs.shape[:2]
    expected = np.empty((L, H))
    for layer in range(L):
        for head in range(H):
            run = varied.run_ids(
                corrupted_ids, framework, patch={(layer, head): base.head_outputs[layer, head]}
            )
            expected[layer, head] = (run.logits[-1, a] - run.logits[-1, w] - got.corrupted_diff) / gap
    np.testing.assert_allclose(got.restored, expected, atol=1e-4)
    assert patching.logit_diff(worse.logits, a, w) == pytest.approx(got.corrupted_diff, abs=1e-5)
    assert (
        np.abs(patching.sweep(plain, CLEAN, CORRUPTED, a, w, framework).restored - got.restored).max() > 1e-3
    )
