"""Direct logit attribution (issue 30 §3) against transformers' own models, GPT-2 and Llama.

The oracle reads transformers' forward pass through hooks — each head's input to the output
projection, each MLP's output, the final norm's input, the embeddings — and the weights from its
`state_dict`, and does the arithmetic in NumPy float64: each head's slice of the output projection,
the final norm frozen at the last position (σ or RMS computed here), the unembedding difference.
The parts must sum to transformers' own logit difference, and attnviz's terms must equal these.
"""

from __future__ import annotations

import numpy as np
import pytest

from attnviz import interp, pretrained
from attnviz.errors import SpecError
from attnviz.interp import dla
from tests.conftest import ATOL_RATIO, requires
from tests.pretrained.test_gpt2 import make_tiny_gpt2
from tests.pretrained.test_llama import make_tiny_llama

transformers = pytest.importorskip("transformers", reason="transformers (the oracle) is not installed")
torch = pytest.importorskip("torch")

FRAMEWORKS = [pytest.param("torch"), pytest.param("tensorflow", marks=requires("tensorflow"))]
TEXT = "The cat sat on the mat because it was"
# attnviz's terms against the oracle's, as a fraction of the largest term (float32 runs, per framework)
TOL = ATOL_RATIO


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def models(request, tmp_path_factory):
    """(attnviz checkpoint, transformers model, family)."""
    folder = tmp_path_factory.mktemp(f"tiny-{request.param}-dla")
    if request.param == "gpt2":
        make_tiny_gpt2(folder, seed=5)
        hf = transformers.GPT2LMHeadModel.from_pretrained(str(folder), attn_implementation="eager")
    else:
        make_tiny_llama(folder, tie=False, seed=5)
        hf = transformers.LlamaForCausalLM.from_pretrained(str(folder), attn_implementation="eager")
    return pretrained.load(folder), hf.eval(), request.param


def oracle(hf, family: str, ids: list[int], answer: int, wrong: int) -> dict:
    """Every term of the logit difference from transformers' hooks and state_dict, float64."""
    gpt2 = family == "gpt2"
    blocks = hf.transformer.h if gpt2 else hf.model.layers
    final = hf.transformer.ln_f if gpt2 else hf.model.norm
    seen: dict = {}

    def keep(key):
        def hook(module, args, out=None):
            seen[key] = (args[0] if out is None else out)[0, -1].double().numpy()

        return hook

    handles = [final.register_forward_pre_hook(keep("final"))]
    for i, block in enumerate(blocks):
        attn = block.attn.c_proj if gpt2 else block.self_attn.o_proj
        handles.append(attn.register_forward_pre_hook(keep(("z", i))))
        handles.append(block.mlp.register_forward_hook(keep(("mlp", i))))
    try:
        with torch.no_grad():
            out = hf(torch.tensor([ids]), output_hidden_states=True)
    finally:
        for handle in handles:
            handle.remove()
    sd = {k: v.double().numpy() for k, v in hf.state_dict().items()}
    cfg = hf.config
    L, H = cfg.num_hidden_layers, cfg.num_attention_heads
    Dh = cfg.hidden_size // H
    x = seen["final"]
    if gpt2:
        gamma, beta, eps = sd["transformer.ln_f.weight"], sd["transformer.ln_f.bias"], cfg.layer_norm_epsilon
        centre = lambda v: v - v.mean(-1, keepdims=True)  # noqa: E731
        sigma = np.sqrt(((x - x.mean()) ** 2).mean() + eps)
    else:
        gamma, beta, eps = sd["model.norm.weight"], 0 * sd["model.norm.weight"], cfg.rms_norm_eps
        centre = lambda v: v  # noqa: E731
        sigma = np.sqrt((x**2).mean() + eps)
    U = sd["lm_head.weight"]
    u = U[answer] - U[wrong]

    def term(v):
        return centre(v) @ (gamma * u) / sigma

    heads, biases = np.zeros((L, H)), np.zeros(L)
    for i in range(L):
        z = seen[("z", i)]  # (H·Dh,)
        if gpt2:
            W = sd[f"transformer.h.{i}.attn.c_proj.weight"]  # Conv1D (in, out)
            slices = [z[h * Dh : (h + 1) * Dh] @ W[h * Dh : (h + 1) * Dh] for h in range(H)]
            biases[i] = term(sd[f"transformer.h.{i}.attn.c_proj.bias"])
        else:
            W = sd[f"model.layers.{i}.self_attn.o_proj.weight"]  # Linear (out, in)
            slices = [W[:, h * Dh : (h + 1) * Dh] @ z[h * Dh : (h + 1) * Dh] for h in range(H)]
        heads[i] = [term(s) for s in slices]
    logits = out.logits[0, -1].double().numpy()
    return {
        "heads": heads,
        "mlps": np.array([term(seen[("mlp", i)]) for i in range(L)]),
        "attn_biases": biases,
        "embeddings": term(out.hidden_states[0][0, -1].double().numpy()),
        "norm_bias": float(beta @ u),
        "logit_diff": float(logits[answer] - logits[wrong]),
    }


def test_the_oracles_parts_sum_to_transformers_logit_difference(models):
    ckpt, hf, family = models
    ids = ckpt.encode(TEXT)[0]
    parts = oracle(hf, family, ids, 5, 9)
    total = parts["heads"].sum() + parts["mlps"].sum() + parts["attn_biases"].sum()
    total += parts["embeddings"] + parts["norm_bias"]
    assert total == pytest.approx(parts["logit_diff"], abs=1e-4 * max(1.0, abs(parts["logit_diff"])))


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_attribution_matches_the_oracle_and_sums_to_the_logit_difference(models, framework):
    ckpt, hf, family = models
    ids = ckpt.encode(TEXT)[0]
    answer, wrong = ids[2], (ids[2] + 17) % ckpt.n_tokens
    got = dla.decompose(ckpt, TEXT, answer, wrong, framework)
    want = oracle(hf, family, ids, answer, wrong)
    scale = np.abs(want["heads"]).max()
    for name in ("heads", "mlps", "attn_biases"):
        np.testing.assert_allclose(getattr(got, name), want[name], atol=TOL[framework] * scale, err_msg=name)
    for name in ("embeddings", "norm_bias", "logit_diff"):
        assert getattr(got, name) == pytest.approx(want[name], abs=TOL[framework] * scale), name
    assert got.total == pytest.approx(got.logit_diff, abs=TOL[framework] * scale)
    assert got.heads.shape == (hf.config.num_hidden_layers, hf.config.num_attention_heads)
    np.testing.assert_array_equal(
        interp.direct_logit_attribution(ckpt, TEXT, answer, wrong, framework), got.heads
    )
    if family == "llama":
        assert got.norm_bias == 0 and not got.attn_biases.any()


def test_refuses_what_it_cannot_read(models):
    ckpt, _, _ = models
    with pytest.raises(SpecError) as err:
        dla.decompose(ckpt, TEXT, "not one token at all", 3)
    assert err.value.field == "answer"
