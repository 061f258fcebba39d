"""The fast patching sweep (issue 30 §1) against the per-head method, GPT-2, Llama and Gemma 3.

The per-head method is the definition of a patching sweep: one full `run_ids(corrupted,
patch={(layer, head): z_clean})` per head. The fast sweep starts each layer's patched runs at that
layer from the corrupted run's residual stream, computes only the positions from the first token
where the prompts differ (over the shared prefix's cached keys and values), batches the layer's
heads and reads the last position's logits only; it must give the same fractions to float32
rounding, whether the prompts differ early or late (past the tiny Gemma's 5-token window).
"""

from __future__ import annotations

import numpy as np
import pytest

from attnviz import pretrained
from attnviz.exec.monitor import Monitor
from attnviz.interp import patching
from tests.conftest import requires
from tests.interp.test_interp_attribution import make_tiny_gemma
from tests.pretrained.test_gemma3 import WINDOW
from tests.pretrained.test_gpt2 import make_tiny_gpt2
from tests.pretrained.test_llama import make_tiny_llama

transformers = pytest.importorskip("transformers", reason="transformers (the oracle) is not installed")
torch = pytest.importorskip("torch")

FRAMEWORKS = [pytest.param("torch"), pytest.param("tensorflow", marks=requires("tensorflow"))]
PAIRS = {  # (clean, corrupted): differing at the second word, and at the second last
    "early": ("The cat sat on the mat because it was", "The dog sat on the mat because it was"),
    "late": ("The cat sat on the mat because the cat was", "The cat sat on the mat because the dog was"),
}
# The fast sweep against the per-head one, in logits: each head's restored fraction times the
# clean − corrupted gap is the change of the answer − wrong logit difference its patch causes;
# the two must agree within 1e-6 of the largest logit, a few float32 ulps. (The same float32
# operations, batched and on the positions after the shared prefix only: a matrix product of
# fewer or batched rows may take another kernel that sums a row in another order — MKL and Eigen
# choose by shape. Measured: at most 4.4e-7 in both frameworks. Divided by a tiny model's small
# gap, 0.135 on GPT-2's late pair, the fractions differ by up to 9e-6 of the largest.)
RTOL_SWEEP = 1e-6


@pytest.fixture(scope="module", params=["gpt2", "llama", "gemma3"])
def models(request, tmp_path_factory):
    """(attnviz checkpoint, transformers model, family)."""
    folder = tmp_path_factory.mktemp(f"tiny-{request.param}-fast")
    if request.param == "gpt2":
        make_tiny_gpt2(folder, seed=7)
        hf = transformers.GPT2LMHeadModel.from_pretrained(str(folder), attn_implementation="eager")
    elif request.param == "llama":
        make_tiny_llama(folder, tie=False, seed=7)
        hf = transformers.LlamaForCausalLM.from_pretrained(str(folder), attn_implementation="eager")
    else:
        make_tiny_gemma(folder)
        hf = transformers.Gemma3ForCausalLM.from_pretrained(str(folder), attn_implementation="eager")
    return pretrained.load(folder), hf.eval(), request.param


def pair(ckpt, clean: str, corrupted: str) -> tuple[int, int]:
    """The clean prompt's most likely next token and the corrupted prompt's (or the runner-up)."""
    clean = ckpt.run(clean).logits[-1, : ckpt.n_tokens]
    corrupted = ckpt.run(corrupted).logits[-1, : ckpt.n_tokens]
    answer, wrong = int(clean.argmax()), int(corrupted.argmax())
    return answer, (wrong if wrong != answer else int(np.argsort(clean)[-2]))


def per_head(ckpt, prompts: tuple[str, str], answer: int, wrong: int, framework: str) -> np.ndarray:
    """`(L, H)` by the definition: one full patched run per head."""
    clean_ids, corrupted_ids = (ckpt.encode(text)[0] for text in prompts)
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
@pytest.mark.parametrize("which", list(PAIRS))
def test_fast_sweep_equals_one_full_run_per_head(models, framework, which):
    ckpt, _, _ = models
    prompts = PAIRS[which]
    clean_ids, corrupted_ids = (ckpt.encode(text)[0] for text in prompts)
    differ = [i for i, (c, d) in enumerate(zip(clean_ids, corrupted_ids, strict=True)) if c != d]
    # the prefix the sweep reuses: a token or two, or longer than the tiny Gemma's window
    assert differ[0] <= 2 if which == "early" else differ[0] > WINDOW
    answer, wrong = pair(ckpt, *prompts)
    seen = []
    result = patching.sweep(
        ckpt, *prompts, answer, wrong, framework, monitor=Monitor(lambda d, t, _: seen.append((d, t)))
    )
    L, H = result.restored.shape
    assert result.complete and seen == [((i + 1) * H, L * H) for i in range(L)]
    expected = per_head(ckpt, prompts, answer, wrong, framework)
    gap = result.clean_diff - result.corrupted_diff
    scale = np.abs(ckpt.run_ids(corrupted_ids, framework).logits[-1]).max()  # the largest logit
    err = np.abs(result.restored - expected).max() * abs(gap) / scale
    assert err <= RTOL_SWEEP, f"fast vs per head ({which}): {err:.2e} of the largest logit"
