"""The fast patching sweep (issue 30 §1) against the per-head method, GPT-2 and Llama.

The per-head method is the definition of a patching sweep: one full `run_ids(corrupted,
patch={(layer, head): z_clean})` per head. The fast sweep starts each layer's patched runs at that
layer from the corrupted run's residual stream, batches the layer's heads and reads the last
position's logits only; it must give the same fractions to float32 rounding.
"""

from __future__ import annotations

import numpy as np
import pytest

from attnviz import pretrained
from attnviz.interp import patching
from tests.conftest import assert_close, requires
from tests.test_gpt2 import make_tiny_gpt2
from tests.test_llama import make_tiny_llama

transformers = pytest.importorskip("transformers", reason="transformers (the oracle) is not installed")
torch = pytest.importorskip("torch")

FRAMEWORKS = [pytest.param("torch"), pytest.param("tensorflow", marks=requires("tensorflow"))]
CLEAN, CORRUPTED = "The cat sat on the mat because it was", "The dog sat on the mat because it was"
# The fast sweep against the per-head one, relative to the largest fraction: the same float32
# operations, batched. PyTorch's batched matrix products sum each row as the unbatched ones do;
# TensorFlow's (Eigen) may take another kernel for a batch's rows: a few ulps of a logit, divided
# by a tiny model's small clean − corrupted difference.
RTOL_SWEEP = {"torch": 1e-6, "tensorflow": 1e-5}


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def models(request, tmp_path_factory):
    """(attnviz checkpoint, transformers model, family)."""
    folder = tmp_path_factory.mktemp(f"tiny-{request.param}-fast")
    if request.param == "gpt2":
        make_tiny_gpt2(folder, seed=7)
        hf = transformers.GPT2LMHeadModel.from_pretrained(str(folder), attn_implementation="eager")
    else:
        make_tiny_llama(folder, tie=False, seed=7)
        hf = transformers.LlamaForCausalLM.from_pretrained(str(folder), attn_implementation="eager")
    return pretrained.load(folder), hf.eval(), request.param


def pair(ckpt) -> tuple[int, int]:
    """The clean prompt's most likely next token and the corrupted prompt's (or the runner-up)."""
    clean = ckpt.run(CLEAN).logits[-1, : ckpt.n_tokens]
    corrupted = ckpt.run(CORRUPTED).logits[-1, : ckpt.n_tokens]
    answer, wrong = int(clean.argmax()), int(corrupted.argmax())
    return answer, (wrong if wrong != answer else int(np.argsort(clean)[-2]))


def per_head(ckpt, answer: int, wrong: int, framework: str) -> np.ndarray:
    """`(L, H)` by the definition: one full patched run per head."""
    clean_ids, corrupted_ids = ckpt.encode(CLEAN)[0], ckpt.encode(CORRUPTED)[0]
    base = ckpt.run_ids(clean_ids, framework, head_outputs=True)
    worse = ckpt.run_ids(corrupted_ids, framework)
    diff = [patching.logit_diff(out.logits, answer, wrong) for out in (base, worse)]
    L, H = base.head_outputs.shape[:2]
    restored = np.zeros((L, H))
    for layer in range(L):
        for head in range(H):
            patch = {(layer, head): base.head_outputs[layer, head]}
            logits = ckpt.run_ids(corrupted_ids, framework, patch=patch).logits
            restored[layer, head] = (patching.logit_diff(logits, answer, wrong) - diff[1]) / (
                diff[0] - diff[1]
            )
    return restored


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_fast_sweep_equals_one_full_run_per_head(models, framework):
    ckpt, _, _ = models
    answer, wrong = pair(ckpt)
    seen = []
    result = patching.sweep(
        ckpt, CLEAN, CORRUPTED, answer, wrong, framework, progress=lambda d, t: seen.append((d, t))
    )
    L, H = result.restored.shape
    assert result.complete and seen == [((i + 1) * H, L * H) for i in range(L)]
    assert_close(
        result.restored, per_head(ckpt, answer, wrong, framework), RTOL_SWEEP[framework], "fast vs per head"
    )
