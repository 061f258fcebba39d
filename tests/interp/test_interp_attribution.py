"""Attribution patching (issue 30 §2) against an independent computation with transformers' hooks.

The reference: on tiny random GPT-2, Llama (GQA) and Gemma 3 (local and global layers, MQA)
models built here, a forward pre-hook on each layer's attention output projection (`c_proj`,
`o_proj`) captures `z`, the heads side by side, on the clean and the corrupted run; autograd gives
`∂(logit[answer] − logit[wrong])/∂z` at the corrupted run; each head's estimate is
`Σ (z_clean − z_corrupted) · grad` over positions and its slice of the width, divided by
`clean_diff − corrupted_diff`. `agreement` is checked against scipy's Spearman ρ (or a NumPy rank
computation where scipy is missing) and a brute-force top-k overlap.
"""

from __future__ import annotations

import numpy as np
import pytest

from attnviz import interp, pretrained
from attnviz.errors import SpecError
from attnviz.interp import patching
from tests.conftest import ATOL_RATIO, requires
from tests.pretrained.test_gemma3 import LINES as GEMMA_LINES
from tests.pretrained.test_gemma3 import tiny_gemma
from tests.pretrained.test_gpt2 import make_tiny_gpt2
from tests.pretrained.test_llama import make_tiny_llama

transformers = pytest.importorskip("transformers", reason="transformers (the oracle) is not installed")
torch = pytest.importorskip("torch")

FRAMEWORKS = [pytest.param("torch"), pytest.param("tensorflow", marks=requires("tensorflow"))]
CLEAN, CORRUPTED = "The cat sat on the mat because it was", "The dog sat on the mat because it was"


def make_tiny_gemma(folder):
    """A tiny random `Gemma3ForCausalLM` (tests.pretrained.test_gemma3) saved with a byte-level BPE tokenizer."""
    from tokenizers import ByteLevelBPETokenizer

    tokenizer = ByteLevelBPETokenizer()
    tokenizer.train_from_iterator(GEMMA_LINES * 3, vocab_size=300, min_frequency=1, show_progress=False)
    tokenizer.save(str(folder / "tokenizer.json"))
    tiny_gemma(tokenizer.get_vocab_size()).save_pretrained(folder, safe_serialization=True)


def output_projections(hf, family: str) -> list:
    """Each layer's attention output projection: its input is the heads' outputs side by side."""
    if family == "gpt2":
        return [block.attn.c_proj for block in hf.transformer.h]
    return [layer.self_attn.o_proj for layer in hf.model.layers]


@pytest.fixture(scope="module", params=["gpt2", "llama", "gemma3"])
def models(request, tmp_path_factory):
    """(attnviz checkpoint, transformers model, family)."""
    folder = tmp_path_factory.mktemp(f"tiny-{request.param}-attribution")
    if request.param == "gpt2":
        make_tiny_gpt2(folder, seed=7)
        cls = transformers.GPT2LMHeadModel
    elif request.param == "llama":
        make_tiny_llama(folder, tie=False, seed=7)
        cls = transformers.LlamaForCausalLM
    else:
        make_tiny_gemma(folder)
        cls = transformers.Gemma3ForCausalLM
    hf = cls.from_pretrained(str(folder), attn_implementation="eager").eval()
    return pretrained.load(folder), hf, request.param


def pair(ckpt) -> tuple[int, int]:
    """The clean prompt's most likely next token and the corrupted prompt's (or the runner-up)."""
    clean = ckpt.run(CLEAN).logits[-1, : ckpt.n_tokens]
    corrupted = ckpt.run(CORRUPTED).logits[-1, : ckpt.n_tokens]
    answer, wrong = int(clean.argmax()), int(corrupted.argmax())
    return answer, (wrong if wrong != answer else int(np.argsort(clean)[-2]))


def reference(hf, family: str, clean_ids, corrupted_ids, answer: int, wrong: int, heads: int):
    """`(L, H)` estimates, clean_diff, corrupted_diff: hooks capture z, autograd gives ∂diff/∂z."""
    projections = output_projections(hf, family)
    z: dict[int, torch.Tensor] = {}
    hooks = [
        proj.register_forward_pre_hook(lambda _m, args, i=i: z.__setitem__(i, args[0]))
        for i, proj in enumerate(projections)
    ]
    try:
        with torch.no_grad():
            clean = hf(torch.tensor([clean_ids])).logits[0, -1]
        z_clean = [z[i].detach() for i in range(len(projections))]  # L × (1, T, H·Dh)
        corrupted = hf(torch.tensor([corrupted_ids])).logits[0, -1]
        diff = corrupted[answer] - corrupted[wrong]
        grads = torch.autograd.grad(diff, [z[i] for i in range(len(projections))])
    finally:
        for hook in hooks:
            hook.remove()
    clean_diff = float(clean[answer] - clean[wrong])
    gap = clean_diff - diff.item()
    estimate = np.stack(
        [
            ((zc - z[i].detach()) * g)[0].reshape(len(clean_ids), heads, -1).sum((0, 2)).numpy()
            for i, (zc, g) in enumerate(zip(z_clean, grads, strict=True))
        ]
    )  # (L, H)
    return estimate / gap, clean_diff, diff.item()


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_attribution_equals_hooks_and_autograd(models, framework):
    ckpt, hf, family = models
    answer, wrong = pair(ckpt)
    clean_ids, corrupted_ids = ckpt.encode(CLEAN)[0], ckpt.encode(CORRUPTED)[0]
    assert len(clean_ids) == len(corrupted_ids)
    result = interp.attribution(ckpt, CLEAN, CORRUPTED, answer, wrong, framework)
    H = ckpt.config.num_attention_heads
    expected, clean_diff, corrupted_diff = reference(hf, family, clean_ids, corrupted_ids, answer, wrong, H)
    tol = ATOL_RATIO[framework]
    assert result.restored.shape == expected.shape == (ckpt.config.num_hidden_layers, H)
    assert np.abs(result.restored - expected).max() <= tol, (result.restored, expected)
    assert result.clean_diff == pytest.approx(clean_diff, abs=tol * abs(clean_diff - corrupted_diff))
    assert result.corrupted_diff == pytest.approx(corrupted_diff, abs=tol * abs(clean_diff - corrupted_diff))
    assert result.complete and np.abs(expected).max() > 1e-3  # the estimate is not trivially zero


def test_attribution_refuses_what_patching_refuses(models):
    ckpt, _, _ = models
    with pytest.raises(SpecError) as error:
        interp.attribution(ckpt, CLEAN, CLEAN + " the cat", 0, 1)
    assert error.value.field == "corrupted"
    with pytest.raises(SpecError) as error:
        interp.attribution(ckpt, CLEAN, CORRUPTED, 3, 3)
    assert error.value.field == "wrong"


# -- agreement -------------------------------------------------------------------------------


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's ρ by scipy, or (scipy missing) Pearson's r of average ranks."""
    try:
        from scipy.stats import spearmanr
    except ImportError:
        return float(np.corrcoef(average_ranks(x), average_ranks(y))[0, 1])
    return float(spearmanr(x, y).statistic)


def average_ranks(v: np.ndarray) -> np.ndarray:
    """Ranks 1 … n, tied values given the mean of the ranks they share."""
    return np.array([np.sum(v < a) + (np.sum(v == a) + 1) / 2 for a in v])


def top(v: np.ndarray, k: int) -> set[int]:
    """The flat indices of the `k` largest |values|, by sorting every index."""
    return set(sorted(range(v.size), key=lambda i: -abs(v.flat[i]))[:k])


@pytest.mark.parametrize("seed", range(5))
def test_agreement_against_spearman_and_brute_force(seed):
    rng = np.random.default_rng(seed)
    exact = rng.normal(size=(6, 5))
    estimate = exact + rng.normal(scale=0.5 + seed, size=exact.shape)
    if seed % 2:  # ties: the zeros of heads that never changed anything
        exact[0], estimate[0] = 0.0, 0.0
    got = interp.agreement(exact, estimate, k=10, worst=4)
    assert got.rho == pytest.approx(spearman(exact.ravel(), estimate.ravel()), abs=1e-12)
    if seed % 2 == 0:  # distinct values: the top sets are well defined
        assert got.overlap == len(top(exact, 10) & top(estimate, 10)) and got.k == 10
    gaps = sorted(np.abs(exact - estimate).ravel(), reverse=True)[:4]
    assert [abs(x - y) for _, _, x, y in got.disagree] == pytest.approx(gaps)
    for layer, head, x, y in got.disagree:
        assert (exact[layer, head], estimate[layer, head]) == (x, y)


def test_agreement_identical_maps_and_bad_input():
    exact = np.arange(12.0).reshape(3, 4)
    same = interp.agreement(exact, 2 * exact + 1, k=20)
    assert same.rho == pytest.approx(1.0) and same.overlap == same.k == 12
    assert interp.agreement(exact, -exact).rho == pytest.approx(-1.0)
    for bad in (exact[:2], np.full((3, 4), np.nan), exact.ravel()):
        with pytest.raises(SpecError) as error:
            interp.agreement(exact, bad)
        assert error.value.field == "estimate"
    with pytest.raises(SpecError) as error:
        interp.agreement(exact, exact, k=0)
    assert error.value.field == "k"


def test_attribution_on_a_patching_result(models):
    """The sweep and the estimate share `PatchingResult`: the same labels and differences."""
    ckpt, _, _ = models
    answer, wrong = pair(ckpt)
    exact = patching.sweep(ckpt, CLEAN, CORRUPTED, answer, wrong)
    estimate = interp.attribution(ckpt, CLEAN, CORRUPTED, answer, wrong)
    assert (estimate.tokens_clean, estimate.tokens_corrupted) == (exact.tokens_clean, exact.tokens_corrupted)
    assert (estimate.answer, estimate.wrong) == (exact.answer, exact.wrong)
    assert estimate.clean_diff == exact.clean_diff
    assert estimate.corrupted_diff == pytest.approx(exact.corrupted_diff, rel=1e-5)
